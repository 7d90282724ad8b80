"""LangMem: LangChain's memory manager, ``langmem`` (``adapter.py``; ``rules.py`` offline)."""

from memory_lab.memories.system import System

SYSTEM = System(
    name="langmem",
    title="LangMem",
    upstream="langmem",
    version="0.0.30",
    licence="MIT",
    reference="https://github.com/langchain-ai/langmem",
    adapter="memory_lab.memories.systems.langmem.adapter",
    memories=("langmem",),
    requires=("langmem",),
    extra="langmem",
    rules="memory_lab.memories.systems.langmem.rules:LangMemScript",
    docs="memories/langmem.md",
)
