"""A registered memory (``MemoryFactory``): how to build it, its parameters, the model roles it
uses and what a run must know of it, declared from the factory's signature (``declare_factory``,
whose arguments ``registry.register_memory`` documents).
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from memory_lab.errors import BadInput
from memory_lab.memories.params import MemorySpecError, Param, ParamDoc

_SCALARS = (int, float, str, bool)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


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


def declare_factory(
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
    *,
    hand_rules: Callable[[str], None] | None = None,
) -> MemoryFactory:
    """The ``MemoryFactory`` of ``build(res, **params)``, its parameters read from the signature
    (``register_memory`` documents the arguments); ``hand_rules`` is given the memory's rule
    script, once its parameters are read (the registry hands it to the offline memory model)."""
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
    if rules and hand_rules is not None:
        hand_rules(rules)
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
