"""Memories: the protocol, the registry and the built-in adapters.

The package registers the built-in memories: its memory modules (``BUILTIN_MODULES``) declare
theirs with ``@register_memory`` and are imported the first time the registry is asked
(``register_builtin_modules``), so ``import memory_lab.memories`` stays light for a memory's
author.
"""

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
    register_builtin_modules,
    register_memory,
    unregister_memory,
)

# The built-in memory modules, in the order ``memory-lab list`` and ``--memory all`` show their
# memories; each registers its own with ``@register_memory`` when imported.
BUILTIN_MODULES = tuple(
    f"{__name__}.{module}"
    for module in (
        "classic",
        "classic_extras",
        "combined",
        "lg_thread",
        "lg_store",
        "memgpt",
        "hybrid",
        "hierarchical",
        "profile",
        "rag",
        "langmem",
        "mem0",
        "graphiti",
        "hindsight",
        "cognee",
    )
)
register_builtin_modules(BUILTIN_MODULES)

__all__ = [
    "Exchange",
    "HoldsTexts",
    "Item",
    "Memory",
    "MemoryFactory",
    "MemoryResources",
    "MemorySpec",
    "MemorySpecError",
    "Param",
    "ParamDoc",
    "Query",
    "Recall",
    "SessionInfo",
    "TextMemory",
    "build_memory",
    "held_texts",
    "memory_factories",
    "parse_memory_spec",
    "register_memory",
    "render_recall",
    "tokens_held",
    "unregister_memory",
]
