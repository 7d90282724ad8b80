"""Memory registry: a snake_case name -> a factory with typed, defaulted parameters.

The adapter contract is one signature: ``factory(ctx: BuildContext, **params) -> BaseMemory``.
The returned memory exposes the conversation context as a *string* under ``history`` (the
adapters hide LangChain's ``return_messages`` switch), takes turns through ``save_context`` and is
fresh for every (memory, dialogue) cell. Anything that can satisfy that - a classic LangChain
memory, or a small ``TextMemory`` subclass wrapping a LangGraph store, tiered memory or hybrid
retrieval - plugs into the same runner unchanged.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

_TYPES = (int, float, str, bool)
_TYPE_NAMES = {t.__name__: t for t in _TYPES}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class BuildContext:
    """What a factory may use to build a memory for one cell.

    ``memory_llm`` and ``embeddings`` are already wired to the cell's token meter; ``cell_id`` is
    unique per cell and safe as a Chroma collection name. Register teardown with ``on_close``.
    """

    memory_llm: BaseChatModel
    embeddings: Embeddings
    cell_id: str
    closers: list[Callable[[], None]] = field(default_factory=list)

    def on_close(self, fn: Callable[[], None]) -> None:
        self.closers.append(fn)

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: Any
    help: str = ""


@dataclass(frozen=True)
class MemoryFactory:
    name: str
    build: Callable[..., BaseMemory]
    params: tuple[Param, ...]
    description: str

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


@dataclass(frozen=True)
class MemorySpec:
    """A memory name with parameter values; ``label`` is what tables and charts show."""

    name: str
    params: dict[str, Any]
    label: str


class MemorySpecError(ValueError):
    """An unknown memory, unknown parameter or bad value in a memory spec."""


_REGISTRY: dict[str, MemoryFactory] = {}


def register_memory(
    name: str, description: str, param_help: dict[str, str] | None = None
) -> Callable[[Callable[..., BaseMemory]], Callable[..., BaseMemory]]:
    """Register ``factory(ctx, **params)`` under ``name``; parameters come from its signature.

    Every parameter after ``ctx`` must be keyword-capable, annotated int/float/str/bool, and have
    a default, so ``memory-lab list`` can show it and specs can override it.
    """
    if not _NAME.match(name):
        raise ValueError(f"memory name {name!r} must be snake_case")
    helps = param_help or {}

    def decorator(fn: Callable[..., BaseMemory]) -> Callable[..., BaseMemory]:
        sig = inspect.signature(fn)
        params = []
        for p in list(sig.parameters.values())[1:]:
            annotation = _TYPE_NAMES.get(p.annotation, p.annotation)  # postponed annotations
            if annotation not in _TYPES or p.default is inspect.Parameter.empty:
                raise TypeError(
                    f"memory {name!r}: parameter {p.name!r} needs an int/float/str/bool "
                    "annotation and a default"
                )
            params.append(Param(p.name, annotation, p.default, helps.get(p.name, "")))
        _REGISTRY[name] = MemoryFactory(name, fn, tuple(params), description)
        return fn

    return decorator


def unregister_memory(name: str) -> None:
    """Remove a registered memory (for notebooks and tests that register their own)."""
    _REGISTRY.pop(name, None)


def memory_factories() -> dict[str, MemoryFactory]:
    """All registered memories, by name, in registration order."""
    return dict(_REGISTRY)


def _convert(factory: MemoryFactory, param: Param, raw: str) -> Any:
    try:
        if param.type is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        return param.type(raw)
    except ValueError:
        raise MemorySpecError(
            f"memory '{factory.name}': parameter '{param.name}' must be "
            f"{param.type.__name__}, got {raw!r}"
        ) from None


def parse_memory_spec(spec: str) -> MemorySpec:
    """Parse ``name`` or ``name:key=value,key=value`` (e.g. ``window:k=4``)."""
    name, _, rest = spec.strip().partition(":")
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(_REGISTRY) or "none registered"
        raise MemorySpecError(f"unknown memory {name!r} in spec {spec!r} (known: {known})")
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
                f"memory '{name}' has no parameter {key!r} (parameters: {allowed})"
            )
        given[key] = _convert(factory, by_name[key], raw.strip())
    params = {**factory.defaults(), **given}
    label = name + (":" + ",".join(f"{k}={given[k]}" for k in sorted(given)) if given else "")
    return MemorySpec(name=name, params=params, label=label)


def build_memory(spec: MemorySpec, ctx: BuildContext) -> BaseMemory:
    """Build a fresh memory for one cell and check it honours the adapter contract."""
    memory = _REGISTRY[spec.name].build(ctx, **spec.params)
    if not isinstance(memory, BaseMemory):
        raise TypeError(
            f"memory '{spec.name}' factory returned {type(memory).__name__}, not a BaseMemory"
        )
    return memory
