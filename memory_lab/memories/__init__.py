"""Memories: the protocol, the registry and the built-in adapters."""

from memory_lab.memories.base import TextMemory
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    Memory,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    render_recall,
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
    "memory_factories",
    "parse_memory_spec",
    "register_memory",
    "render_recall",
    "unregister_memory",
]
