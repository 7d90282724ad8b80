"""Memory registry: a snake_case name -> a factory with typed, defaulted, validated parameters.

The factory contract is one signature: ``factory(res: MemoryResources, **params) -> Memory``
(or anything ``as_memory`` adapts, such as a LangChain ``BaseMemory``). Parameters are the
factory's keyword arguments: annotated ``int``, ``float``, ``str``, ``bool``, ``list[...]`` of
those, or ``Literal[...]`` choices, each with a default; bounds are declared with ``ParamDoc``.
Specs are checked when parsed, so ``window:k=-1`` fails before a results folder is made.

There is one way to register a memory, ``@register_memory``, for the built-ins and everyone
else. The built-in memories and the field systems' adapters (found by ``discover``, not listed)
register when the registry is first asked; installed packages name a module in the
``memory_lab.memories`` entry-point group (or declare a system in ``memory_lab.systems``), and a
``module:factory`` spec imports its module on use (so it also works in ``--jobs`` and Ray
workers and on ``--resume``), whose decorator registers it. A memory may bring the offline
model's rule script for its own prompts (``rules``; a system's comes with its declaration),
passed on to the offline memory model as it registers. This module imports no memory.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any, Literal

from memory_lab import telemetry
from memory_lab.errors import BadInput, ConfigError, EnvironmentProblem, MemoryLabError
from memory_lab.memories.protocol import Memory, as_memory, lookup_resource
from memory_lab.memories.sources import ENTRY_POINT_GROUP, check_source, pin

BUILTIN_PACKAGE = "memory_lab.memories"  # memories defined in it are recorded without a source
LIST_SEPARATOR = "+"

_SCALARS = (int, float, str, bool)
INT_LIMIT = 2**31 - 1  # an int parameter without a declared max fits a C int (k, sizes, tokens)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SOURCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class MemorySpecError(BadInput):
    """An unknown memory, unknown parameter or bad value in a memory spec."""


@dataclass(frozen=True)
class ParamDoc:
    """Help text and bounds for one factory parameter (type and default come from its signature).

    ``check`` validates a converted value further when a spec is parsed (e.g. that each part of
    a composite memory is itself a valid spec) and returns it; it raises MemorySpecError.
    """

    help: str = ""
    min: float | None = None
    max: float | None = None
    check: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Param:
    name: str
    type: Any  # int | float | str | bool | list[...] | Literal[...]
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    validate: Callable[[Any], Any] | None = field(default=None, compare=False)

    @property
    def type_name(self) -> str:
        origin = typing.get_origin(self.type)
        if origin is Literal:
            return "|".join(str(c) for c in typing.get_args(self.type))
        if origin is list:
            return f"list[{typing.get_args(self.type)[0].__name__}]"
        return self.type.__name__

    def check(self, value: Any, memory: str) -> Any:
        """``value`` converted and checked; MemorySpecError naming the memory otherwise."""
        value = self._convert(value, memory)
        return self.validate(value) if self.validate is not None else value

    def _convert(self, value: Any, memory: str) -> Any:
        origin = typing.get_origin(self.type)
        if origin is list:
            inner = typing.get_args(self.type)[0]
            if isinstance(value, str):
                value = [v for v in value.split(LIST_SEPARATOR) if v.strip()]
            if not isinstance(value, (list, tuple)):
                raise self._error(memory, value)
            return [self._scalar(inner, v, memory) for v in value]
        if origin is Literal:
            choices = typing.get_args(self.type)
            for choice in choices:
                if str(choice) == str(value):
                    return choice
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be one of "
                f"{', '.join(map(str, choices))}, got {value!r}"
            )
        return self._scalar(self.type, value, memory)

    def _scalar(self, kind: type, raw: Any, memory: str) -> Any:
        try:
            if kind is bool:
                if isinstance(raw, bool):
                    value = raw
                elif str(raw).lower() in ("1", "true", "yes", "on"):
                    value = True
                elif str(raw).lower() in ("0", "false", "no", "off"):
                    value = False
                else:
                    raise ValueError(raw)
            elif kind is int and isinstance(raw, float) and not raw.is_integer():
                raise ValueError(raw)
            else:
                value = kind(str(raw).strip() if not isinstance(raw, (int, float)) else raw)
        except (TypeError, ValueError, OverflowError):
            raise self._error(memory, raw) from None
        if kind is float and not math.isfinite(value):
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be a finite number, got {raw!r}"
            )
        if kind is int and abs(value) > INT_LIMIT and self.max is None:
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be between {-INT_LIMIT:,} "
                f"and {INT_LIMIT:,}, got {value}"
            )
        if kind in (int, float):
            if self.min is not None and value < self.min:
                raise MemorySpecError(
                    f"memory '{memory}': parameter '{self.name}' must be at least "
                    f"{_num(self.min)}, got {value}"
                )
            if self.max is not None and value > self.max:
                raise MemorySpecError(
                    f"memory '{memory}': parameter '{self.name}' must be at most "
                    f"{_num(self.max)}, got {value}"
                )
        return value

    def _error(self, memory: str, raw: Any) -> MemorySpecError:
        return MemorySpecError(
            f"memory '{memory}': parameter '{self.name}' must be {self.type_name}, got {raw!r}"
        )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class MemoryFactory:
    """A registered memory: how to build it, its parameters, and the model roles it uses."""

    name: str
    build: Callable[..., Any]
    params: tuple[Param, ...]
    description: str
    roles: tuple[str, ...] = ()
    source: str | None = None  # "module:attr" to import it from, for workers and resume
    roles_of: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    # preflight(params, resource) raises ValueError when a run could not build this memory (a
    # server it needs is unreachable, parameters that contradict each other); called before a
    # results folder is made
    preflight: Callable[[dict[str, Any], Callable[[str], str]], None] | None = None
    # modules its cells import on first use (a vector store, its HTTP stack): imported in the
    # main thread before cells run in threads, so no thread sees another's half-imported module
    stack: tuple[str, ...] = ()
    # (parameter, values) pairs: with any of these parameters at one of its values the memory
    # keeps its state on a server (the ``postgres`` resource), where it outlives the process
    persistent: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    # the field system it belongs to (``memories/system.py``), and ``module:Class`` of the
    # offline model's rule script for its prompts (by default its system's)
    system: Any = None
    rules: str | None = None

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def keeps_state(self, params: dict[str, Any]) -> bool:
        """Whether a memory with these parameters keeps its state on a server (``persistent``)."""
        return any(params.get(name) in values for name, values in self.persistent)

    def roles_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The model roles a memory with these parameters uses (its parts' roles too)."""
        extra = self.roles_of(params) if self.roles_of is not None else ()
        return tuple(dict.fromkeys((*self.roles, *extra)))


@dataclass(frozen=True)
class MemorySpec:
    """A memory name with parameter values; ``label`` is what tables and charts show."""

    name: str
    params: dict[str, Any]
    label: str
    source: str | None = None
    # the file ``source``'s module was imported from and its SHA-256, when the run started
    # (``sources.pin``): what a resume may import (``sources.check_source``)
    source_file: str | None = None
    source_sha256: str | None = None

    @property
    def factory(self) -> MemoryFactory:
        """The registered factory this spec names, looked up at most once per spec (kept on the
        spec, never pickled: a worker resolves it in its own registry)."""
        found = self.__dict__.get("_factory")
        if found is None:
            found = self.__dict__["_factory"] = factory_for(self.name, self.source)
        return found

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_factory"}

    def to_json(self) -> dict[str, Any]:
        pinned = {"source_file": self.source_file, "source_sha256": self.source_sha256}
        return {
            "label": self.label,
            "name": self.name,
            "params": self.params,
            "source": self.source,
            **({k: v for k, v in pinned.items() if v is not None}),
        }


def _annotation(fn: Callable[..., Any], raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    namespace = {**vars(typing), "list": list, **getattr(fn, "__globals__", {})}
    try:
        return eval(raw, namespace)  # noqa: S307 - a postponed annotation of our own caller
    except Exception:  # noqa: BLE001
        return raw


def _valid_type(kind: Any) -> bool:
    origin = typing.get_origin(kind)
    if origin is list:
        args = typing.get_args(kind)
        return len(args) == 1 and args[0] in _SCALARS
    if origin is Literal:
        return all(isinstance(c, (str, int, bool)) for c in typing.get_args(kind))
    return kind in _SCALARS


Preflight = Callable[[dict[str, Any], Callable[[str], str]], None]
Persistent = dict[str, tuple[Any, ...] | list[Any]]


def _persistent(
    name: str, params: tuple[Param, ...], persistent: Persistent | None
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``persistent`` checked against the parameters: each names one, with values it takes."""
    by_name = {p.name: p for p in params}
    out = []
    for key, values in (persistent or {}).items():
        if key not in by_name:
            raise TypeError(f"memory {name!r}: persistent names no parameter {key!r}")
        if isinstance(values, (str, bytes)) or not isinstance(values, (tuple, list)) or not values:
            raise TypeError(
                f"memory {name!r}: persistent[{key!r}] must be a tuple of the parameter's "
                f"values, got {values!r}"
            )
        try:
            out.append((key, tuple(by_name[key]._convert(v, name) for v in values)))
        except MemorySpecError as exc:
            raise TypeError(f"{exc} (in persistent)") from None
    return tuple(out)


def _declare(
    name: str,
    build: Callable[..., Any],
    description: str,
    params: dict[str, ParamDoc | str] | None = None,
    roles: tuple[str, ...] = (),
    source: str | None = None,
    roles_of: Callable[[dict[str, Any]], tuple[str, ...]] | None = None,
    preflight: Preflight | None = None,
    stack: tuple[str, ...] = (),
    persistent: Persistent | None = None,
    system: Any = None,
    rules: str | None = None,
) -> MemoryFactory:
    """The ``MemoryFactory`` of ``build(res, **params)``, its parameters read from the signature
    (``register_memory`` documents the arguments)."""
    if not _NAME.match(name):
        raise BadInput(f"memory name {name!r} must be snake_case")
    docs = {k: ParamDoc(v) if isinstance(v, str) else v for k, v in (params or {}).items()}
    out = []
    for p in list(inspect.signature(build).parameters.values())[1:]:
        kind = _annotation(build, p.annotation)
        if not _valid_type(kind) or p.default is inspect.Parameter.empty:
            raise TypeError(
                f"memory {name!r}: parameter {p.name!r} needs an int/float/str/bool (or list, "
                "Literal) annotation and a default"
            )
        doc = docs.pop(p.name, ParamDoc())
        out.append(Param(p.name, kind, p.default, doc.help, doc.min, doc.max, doc.check))
    if docs:
        raise TypeError(f"memory {name!r}: documented parameters not in the factory: {list(docs)}")
    for p in out:  # a default must pass its own bounds (its ``check`` runs when it is used)
        p._convert(p.default, name)
    rules = rules or getattr(system, "rules", None)
    if rules:  # the offline memory model answers its prompts by it from now on
        from memory_lab.models.offline_rules import declare

        declare(rules)
    return MemoryFactory(
        name,
        build,
        tuple(out),
        description,
        tuple(roles),
        source=source,
        roles_of=roles_of,
        preflight=preflight,
        stack=tuple(stack),
        persistent=_persistent(name, tuple(out), persistent),
        system=system,
        rules=rules,
    )


_REGISTRY: dict[str, MemoryFactory] = {}
_LOADED = False  # the built-in memories and systems' adapters imported (at the first lookup)


def _registry() -> dict[str, MemoryFactory]:
    """The registered memories, the built-in modules and the field systems' adapters imported
    first (their memories first: built-ins in module order, then the systems by name)."""
    global _LOADED
    if not _LOADED:
        from memory_lab.memories import discover

        modules = [*discover.builtin_modules(), *(s.adapter for s in discover.builtin_systems())]
        for module in modules:
            importlib.import_module(module)  # raises: tried again at the next lookup
        _LOADED = True
        # in module order, whichever a program imported first; the others after them
        rank = {module: i for i, module in enumerate(modules)}
        ordered = sorted(_REGISTRY.values(), key=lambda f: rank.get(f.build.__module__, len(rank)))
        _REGISTRY.clear()
        _REGISTRY.update((f.name, f) for f in ordered)
    return _REGISTRY


def is_builtin_module(module: str) -> bool:
    """Whether ``module`` is memory-lab's own memories' (built in, registered wherever
    ``memory_lab`` is imported)."""
    return module == BUILTIN_PACKAGE or module.startswith(BUILTIN_PACKAGE + ".")


_is_builtin = is_builtin_module


def _source_of(fn: Callable[..., Any]) -> str | None:
    """``module:name`` to import ``fn`` from in another process; None for a built-in (its
    package registers it wherever ``memory_lab`` is imported) and for what cannot be imported
    by name (``__main__``, a function defined inside another)."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__" or "<locals>" in getattr(fn, "__qualname__", "<locals>"):
        return None
    if _is_builtin(module):
        return None
    return f"{module}:{fn.__name__}"


def register_memory(
    name: str,
    description: str,
    params: dict[str, ParamDoc | str] | None = None,
    roles: tuple[str, ...] = (),
    preflight: Preflight | None = None,
    roles_of: Callable[[dict[str, Any]], tuple[str, ...]] | None = None,
    stack: tuple[str, ...] = (),
    persistent: Persistent | None = None,
    system: Any = None,
    rules: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``factory(res, **params)`` under ``name`` (replacing one of that name).

    Every parameter after ``res`` must be keyword-capable, annotated (int, float, str, bool,
    ``list[...]`` of those, or ``Literal[...]``) and have a default; ``params`` gives their help
    text and bounds (``ParamDoc``, or a help string). ``roles`` are the model roles it uses
    (``("memory",)``: the memory LLM, ``res.memory_llm``); ``roles_of(params)`` names roles that
    depend on the parameters (a composite memory's parts). ``preflight(params, resource)`` runs
    before a run starts and raises ``ValueError`` (one line) when the memory could not be built:
    parameters that contradict each other, a server that is missing or unreachable. ``stack``
    names modules the memory imports on first use (e.g. ``chroma.STACK``); ``prepare_memories``
    imports them in the main thread before cells run in threads. ``persistent`` declares where
    the memory keeps its state: ``{parameter: (values, ...)}``, e.g. ``{"saver": ("postgres",)}``,
    names the parameter values with which it keeps it on a server (the ``postgres`` resource),
    so ``memory-lab serve`` gives each user a fixed cell id there and finds their memory again
    after a restart (``MemoryFactory.keeps_state``); a memory declaring none lives in the process.
    ``system`` is the field system the memory runs (its ``SYSTEM`` declaration: what it needs,
    checked before a run; its telemetry switches, set now); ``rules`` (``module:Class``, by
    default the system's) is the offline memory model's rule script for the memory's prompts.

    Defined in an importable module, the memory can also be named as ``module:factory`` in a
    spec, which makes it available in ``--jobs`` and Ray workers and on ``--resume``.
    """

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        factory = _declare(
            name,
            fn,
            description,
            params,
            roles,
            _source_of(fn),
            roles_of,
            preflight,
            stack,
            persistent,
            system,
            rules,
        )
        if system is not None and system.telemetry:
            telemetry.switch_off(system.telemetry)  # an installed system's opt-outs, from now
        # a built-in registers as its module is imported; another memory after the built-ins,
        # so it may replace one of them
        registry = _REGISTRY if _is_builtin(getattr(fn, "__module__", "")) else _registry()
        registry[name] = factory
        fn.memory_name = name  # type: ignore[attr-defined]
        return fn

    return decorator


def unregister_memory(name: str) -> None:
    """Remove a registered memory (for notebooks and tests that register their own)."""
    _registry().pop(name, None)


def memory_factories() -> dict[str, MemoryFactory]:
    """All known memories, by name: built-ins first, then installed and registered ones."""
    from memory_lab.memories import discover

    for system in discover.installed_systems():
        if not any(name in _registry() for name in system.memories) or not system.memories:
            try:
                importlib.import_module(system.adapter)
            except ImportError as exc:
                raise MemorySpecError(
                    f"system '{system.name}': cannot import its adapter {system.adapter!r}: {exc}"
                ) from None
    for ep in _entry_points():
        if ep.name not in _registry():
            try:
                _import_source(ep.value, ep.name)
            except MemorySpecError:
                continue
    return dict(_registry())


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _import_source(source: str, name_hint: str | None = None) -> MemoryFactory:
    """Import ``module:attr`` and return the memory it defines (registering it if needed)."""
    module_name, _, attr = source.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MemorySpecError(f"memory '{source}': cannot import {module_name!r}: {exc}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise MemorySpecError(f"memory '{source}': module {module_name!r} has no {attr!r}")
    if isinstance(obj, MemoryFactory):
        factory = obj
    else:
        name = getattr(obj, "memory_name", None)
        registered = _registry().get(name) if name else None
        if registered is not None and registered.build is obj:
            factory = registered
        elif callable(obj):
            doc = (inspect.getdoc(obj) or "").split("\n")[0]
            try:  # any callable is taken for a factory: one that is not is bad input
                factory = _declare(name or name_hint or attr, obj, doc or source)
            except (TypeError, ValueError) as exc:  # ValueError: no signature (a builtin)
                raise MemorySpecError(
                    f"memory '{source}': {attr!r} is not a memory factory ({exc})"
                ) from None
        else:
            raise MemorySpecError(f"memory '{source}': {attr!r} is not a memory factory")
    factory = replace(factory, source=source)
    _registry()[factory.name] = factory
    return factory


def _split_spec(spec: str) -> tuple[str | None, str, str]:
    """(source or None, name, params text) of a spec."""
    text = spec.strip()
    parts = text.split(":")
    known = parts[0] in _registry() or any(ep.name == parts[0] for ep in _entry_points())
    if not known and len(parts) >= 2 and _SOURCE.match(f"{parts[0]}:{parts[1]}"):
        return f"{parts[0]}:{parts[1]}", "", ":".join(parts[2:])
    name, _, rest = text.partition(":")
    return None, name, rest


def factory_for(name: str, source: str | None = None) -> MemoryFactory:
    """The registered factory for a name, importing ``source`` or an entry point when needed."""
    if name in _registry():
        return _registry()[name]
    if source:
        return _import_source(source, name)
    for ep in _entry_points():
        if ep.name == name:
            return _import_source(ep.value, name)
    known = ", ".join(memory_factories()) or "none registered"
    raise MemorySpecError(f"unknown memory {name!r} (known: {known}; or give module:factory)")


def parse_memory_spec(spec: str) -> MemorySpec:
    """Parse ``name``, ``name:key=value,key=value`` or ``module:factory[:key=value,...]``.

    List values are joined with ``+`` (``hybrid:weights=0.6+0.4``).
    """
    source, name, rest = _split_spec(spec)
    try:
        factory = _import_source(source) if source else factory_for(name)
    except MemorySpecError as exc:
        raise MemorySpecError(f"{exc} (in spec {spec!r})") from None
    by_name = {p.name: p for p in factory.params}
    given: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise MemorySpecError(f"memory spec {spec!r}: expected key=value, got {item!r}")
        if key not in by_name:
            allowed = ", ".join(by_name) or "none"
            raise MemorySpecError(
                f"memory '{factory.name}' has no parameter {key!r} (parameters: {allowed})"
            )
        if key in given:
            raise MemorySpecError(f"memory spec {spec!r}: parameter {key!r} is given twice")
        given[key] = by_name[key].check(raw.strip(), factory.name)
    return make_spec(factory, given)


def _show(value: Any) -> str:
    return LIST_SEPARATOR.join(map(str, value)) if isinstance(value, list) else str(value)


def make_spec(factory: MemoryFactory, given: dict[str, Any]) -> MemorySpec:
    """A spec of ``factory`` with the ``given`` parameters (the rest at their defaults)."""
    params = {**factory.defaults(), **given}
    label = factory.name
    if given:
        label += ":" + ",".join(f"{k}={_show(given[k])}" for k in sorted(given))
    file, sha = pin(factory.source)
    spec = MemorySpec(factory.name, params, label, factory.source, file, sha)
    return _resolved(spec, factory)


def spec_from_json(
    data: dict[str, Any], where: str = "run.json", trust_sources: bool = False
) -> MemorySpec:
    """Rebuild a spec from run.json: the recorded parameters, checked, never today's defaults;
    its source imported only when a resume may (``sources.check_source``: UntrustedSource
    naming ``where`` otherwise, unless ``trust_sources``)."""
    check_source(data, where, trust_sources)
    factory = factory_for(data["name"], data.get("source"))
    by_name = {p.name: p for p in factory.params}
    params = {}
    for key, value in data.get("params", {}).items():
        if key not in by_name:
            raise MemorySpecError(
                f"memory '{factory.name}' no longer has the recorded parameter {key!r}"
            )
        params[key] = by_name[key].check(value, factory.name)
    missing = sorted(set(by_name) - set(params))
    if missing:
        raise MemorySpecError(
            f"memory '{factory.name}' has parameters not recorded in run.json: {missing}"
        )
    file, sha = data.get("source_file"), data.get("source_sha256")
    spec = MemorySpec(factory.name, params, data["label"], factory.source, file, sha)
    return _resolved(spec, factory)


def _resolved(spec: MemorySpec, factory: MemoryFactory) -> MemorySpec:
    """``spec`` knowing the factory it was parsed against (so it is never looked up again)."""
    spec.__dict__["_factory"] = factory
    return spec


def preflight_memories(specs: list[MemorySpec], resources: dict[str, str] | None = None) -> None:
    """Every memory's ``preflight``, before a run: one error naming the first problem (first
    whether its system is installed here, ``check_installed``). A
    preflight's plain ``ValueError`` (a memory of the user's need not know ``errors.py``) is
    bad input, a ``ConfigError``."""
    for spec in specs:
        factory = spec.factory
        check_installed(factory)
        if factory.preflight is None:
            continue
        try:
            factory.preflight(
                dict(spec.params), lambda name, s=spec: lookup_resource(resources, name, s.label)
            )
        except ValueError as exc:
            if isinstance(exc, MemoryLabError):
                raise
            raise ConfigError(str(exc)) from exc


def prepare_memories(specs: list[MemorySpec]) -> None:
    """Import every memory's ``stack`` in this thread: called before cells run in threads."""
    for spec in specs:
        for module in spec.factory.stack:
            try:
                importlib.import_module(module)
            except ImportError:
                pass  # the cell that needs it reports it


def build_memory(spec: MemorySpec, res: Any) -> Any:
    """A fresh memory for one cell: what the factory returns, made a ``Memory`` for this run
    by ``as_memory`` (a LangChain ``BaseMemory`` wrapped, the run's ``timestamps`` applied)."""
    factory = spec.factory
    check_installed(factory)
    memory = as_memory(factory.build(res, **spec.params), res, spec.name)
    if not isinstance(memory, Memory):
        raise TypeError(
            f"memory '{spec.name}' factory returned {type(memory).__name__}, which has not "
            "observe/end_session/recall/snapshot/close (the Memory protocol) nor is a BaseMemory"
        )
    return memory


# ------------------------------------------------------------------ what a run needs, by system


def check_installed(factory: MemoryFactory) -> None:
    """EnvironmentProblem (exit 3), one line naming the install command, when the memory's
    system is not installed here."""
    missing = factory.system.missing() if factory.system is not None else None
    if missing:
        raise EnvironmentProblem(missing)
