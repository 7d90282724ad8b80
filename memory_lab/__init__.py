"""memory-lab: compare conversational memory strategies for LLM chatbots, offline by default."""

from memory_lab.benchmark import resolve_memories, run_benchmark
from memory_lab.config import RunConfig
from memory_lab.dialogue import (
    Dialogue,
    DialogueError,
    Probe,
    Session,
    Turn,
)
from memory_lab.inspector import MemoryView, inspect_memory
from memory_lab.memories import (
    Exchange,
    Item,
    Memory,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    TextMemory,
    build_memory,
    memory_factories,
    parse_memory_spec,
    register_memory,
)
from memory_lab.results import Results, read_results, summarize
from memory_lab.runner import RunModels, replay_dialogue
from memory_lab.sources import load_dialogues, validate

__all__ = [
    "Dialogue",
    "DialogueError",
    "Exchange",
    "Item",
    "Memory",
    "MemoryResources",
    "MemoryView",
    "Probe",
    "Query",
    "Recall",
    "RunConfig",
    "SessionInfo",
    "Results",
    "RunModels",
    "Session",
    "TextMemory",
    "Turn",
    "build_memory",
    "inspect_memory",
    "load_dialogues",
    "memory_factories",
    "parse_memory_spec",
    "read_results",
    "register_memory",
    "replay_dialogue",
    "resolve_memories",
    "run_benchmark",
    "summarize",
    "validate",
]
