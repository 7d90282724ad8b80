"""Memory adapters behind one registry. Families are registered by importing them here."""

from memory_lab.memories import classic  # noqa: F401  (registers the five classic memories)
from memory_lab.memories.base import TextMemory
from memory_lab.memories.registry import (
    BuildContext,
    MemoryFactory,
    MemorySpec,
    MemorySpecError,
    Param,
    build_memory,
    memory_factories,
    parse_memory_spec,
    register_memory,
    unregister_memory,
)

__all__ = [
    "BuildContext",
    "MemoryFactory",
    "MemorySpec",
    "MemorySpecError",
    "Param",
    "TextMemory",
    "build_memory",
    "memory_factories",
    "parse_memory_spec",
    "register_memory",
    "unregister_memory",
]
