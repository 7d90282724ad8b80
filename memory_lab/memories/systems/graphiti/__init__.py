"""Graphiti: Zep's temporal knowledge graph, ``graphiti-core`` on an embedded Kuzu database
(``adapter.py``; ``rules.py`` offline)."""

from memory_lab.memories.system import System

SYSTEM = System(
    name="graphiti",
    title="Graphiti",
    upstream="graphiti-core",
    version="0.31.2",
    licence="Apache-2.0",
    reference="https://github.com/getzep/graphiti (Rasmussen et al., arXiv:2501.13956)",
    adapter="memory_lab.memories.systems.graphiti.adapter",
    memories=("graphiti",),
    requires=("graphiti_core", "kuzu"),
    extra="graphiti",
    telemetry={"GRAPHITI_TELEMETRY_ENABLED": "false"},  # PostHog events on initialisation
    rules="memory_lab.memories.systems.graphiti.rules:GraphitiScript",
    docs="memories/graphiti.md",
)
