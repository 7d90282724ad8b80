"""mem0: the open-source ``mem0ai`` package's ``Memory`` (``adapter.py``; ``rules.py`` offline)."""

from memory_lab.memories.system import System

SYSTEM = System(
    name="mem0",
    title="mem0",
    upstream="mem0ai",
    version="2.2.1",
    licence="Apache-2.0",
    reference="https://github.com/mem0ai/mem0 (Chhikara et al., arXiv:2504.19413)",
    adapter="memory_lab.memories.systems.mem0.adapter",
    memories=("mem0",),
    requires=("mem0",),
    extra="mem0",
    telemetry={"MEM0_TELEMETRY": "False"},  # PostHog events on every call
    rules="memory_lab.memories.systems.mem0.rules:Mem0Script",
    docs="memories/mem0.md",
)
