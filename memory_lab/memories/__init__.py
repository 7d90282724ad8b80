"""Memories: the contract (protocol, registry, parameters, specs), the built-in memories
(``builtin/``) and the field's systems (``systems/``, one package each, ``system.py`` their
declaration).

Nothing here lists a memory: the registry finds the built-in modules and the systems
(``discover``) and imports them the first time it is asked, so ``import memory_lab.memories``
stays light for a memory's author; the names below are imported on first use (PEP 562).
"""

# ruff: noqa: F401  (the imports under TYPE_CHECKING are the exports, for type checkers)
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "TextMemory": "memory_lab.memories.base",
    **dict.fromkeys(
        (
            "Exchange",
            "HoldsTexts",
            "Item",
            "Memory",
            "MemoryResources",
            "Query",
            "Recall",
            "SessionInfo",
            "held_texts",
            "render_recall",
            "tokens_held",
        ),
        "memory_lab.memories.protocol",
    ),
    **dict.fromkeys(
        (
            "MemoryFactory",
            "MemorySpec",
            "MemorySpecError",
            "Param",
            "ParamDoc",
            "build_memory",
            "memory_factories",
            "parse_memory_spec",
            "register_memory",
            "unregister_memory",
        ),
        "memory_lab.memories.registry",
    ),
    **dict.fromkeys(("Environment", "System"), "memory_lab.memories.system"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from memory_lab.memories.base import TextMemory
    from memory_lab.memories.protocol import (
        Exchange,
        HoldsTexts,
        Item,
        Memory,
        MemoryResources,
        Query,
        Recall,
        SessionInfo,
        held_texts,
        render_recall,
        tokens_held,
    )
    from memory_lab.memories.registry import (
        MemoryFactory,
        MemorySpec,
        MemorySpecError,
        Param,
        ParamDoc,
        build_memory,
        memory_factories,
        parse_memory_spec,
        register_memory,
        unregister_memory,
    )
    from memory_lab.memories.system import Environment, System
