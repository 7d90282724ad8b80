"""Hindsight: ``hindsight-api-slim`` on its embedded PostgreSQL, in an environment of its own
(``adapter.py`` here, ``worker.py`` and ``db.py`` there; ``rules.py`` offline)."""

from memory_lab.memories.system import Environment, System

SYSTEM = System(
    name="hindsight",
    title="Hindsight",
    upstream="hindsight-api-slim",
    version="1.1.0",
    licence="MIT",
    reference="https://pypi.org/project/hindsight-api-slim/ (Vectorize)",
    adapter="memory_lab.memories.systems.hindsight.adapter",
    memories=("hindsight",),
    # Hindsight needs protobuf>=7, mem0 protobuf<7: one environment cannot hold both.
    # dateparser 1.5 returns three values per date found where Hindsight 1.1.0 unpacks two: every
    # query naming a date would lose Hindsight's temporal retrieval (logged, not raised)
    environment=Environment(
        folder=".venv-hindsight",
        requirement="hindsight-api-slim[embedded-db]",
        constraints="constraints-hindsight.txt",
        resource="hindsight_python",
        pins=("dateparser<1.5",),
    ),
    # OpenTelemetry traces only when set (off by default; set off here)
    telemetry={"HINDSIGHT_API_OTEL_TRACES_ENABLED": "false"},
    rules="memory_lab.memories.systems.hindsight.rules:HindsightScript",
    docs="memories/hindsight.md",
)
