"""Published LoCoMo and BEAM figures of other systems (``data/published_locomo.json``,
``data/published_beam.json``), for the report and ``memory-lab beam-scores``.

They are other people's numbers, from other answering models, prompts and judges: the report
shows them apart from the run's own, labelled as such, and only for runs over LoCoMo.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pandas as pd

from memory_lab.dialogue.importers.locomo import CATEGORY_KEY

PUBLISHED_FILE = "published_locomo.json"
PUBLISHED_BEAM_FILE = "published_beam.json"


def published_locomo() -> dict[str, Any]:
    """The bundled file: ``about``, ``dataset``, ``model``, ``model_source`` and ``rows`` (each
    ``system``, ``j``, ``p95_seconds`` and ``tokens_per_query`` (None where the source gives
    none), ``source``, ``source_note``)."""
    text = (resources.files("memory_lab") / "data" / PUBLISHED_FILE).read_text("utf-8")
    return json.loads(text)


def published_beam() -> dict[str, Any]:
    """The bundled BEAM file: ``about``, ``dataset`` and ``rows`` (each ``system``, ``scale``,
    ``score`` in percent, ``source``, ``source_note``)."""
    text = (resources.files("memory_lab") / "data" / PUBLISHED_BEAM_FILE).read_text("utf-8")
    return json.loads(text)


def is_locomo_run(probes: pd.DataFrame) -> bool:
    """True when the run's probes came from the LoCoMo importer (they keep its category id)."""
    if probes.empty or "probe_metadata" not in probes:
        return False
    return any(isinstance(m, dict) and CATEGORY_KEY in m for m in probes["probe_metadata"])
