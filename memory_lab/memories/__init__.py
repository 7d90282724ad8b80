"""Memories: the protocol, the registry and the built-in adapters."""

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
