"""Cognee: ``cognee`` on its embedded stores, in an environment of its own (``adapter.py`` here,
``worker.py`` there; ``rules.py`` offline)."""

from memory_lab.memories.system import Environment, System

SYSTEM = System(
    name="cognee",
    title="Cognee",
    upstream="cognee",
    version="1.6.5",
    licence="Apache-2.0",
    reference="https://github.com/topoteretes/cognee",
    adapter="memory_lab.memories.systems.cognee.adapter",
    memories=("cognee",),
    # Cognee pins pandas<3, onnxruntime 1.23 and its own filelock
    environment=Environment(
        folder=".venv-cognee",
        requirement="cognee",
        constraints="constraints-cognee.txt",
        resource="cognee_python",
    ),
    # an event per operation with a persistent machine id kept under ~/.cognee
    telemetry={"TELEMETRY_DISABLED": "1"},
    rules="memory_lab.memories.systems.cognee.rules:CogneeScript",
    docs="memories/cognee.md",
)
