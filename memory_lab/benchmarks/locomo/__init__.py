"""LoCoMo (Maharana et al., 2024): ten long two-person conversations with questions over five
categories, scored by its F1 (docs/importers.md)."""

from memory_lab.benchmarks.declaration import Benchmark, Section
from memory_lab.benchmarks.locomo import f1
from memory_lab.benchmarks.locomo.importer import (
    CATEGORY_KEY,
    CATEGORY_MAPS,
    PROBE_KEYS,
    import_locomo,
    is_adversarial,
)
from memory_lab.scoring.answers import AnswerScore
from memory_lab.scoring.metrics import ANSWERING_MODEL, PROBES, Metric

BENCHMARK = Benchmark(
    title="LoCoMo",
    name="locomo",
    importer=import_locomo,
    origin="LoCoMo is not shipped: locomo10.json is in data/locomo10.zip of the "
    "snap-research/locomo repository on GitHub",
    licence="the snap-research/locomo repository states no licence for its data: not shipped",
    docs="docs/importers.md",
    categories={str(k): v for k, v in CATEGORY_MAPS["paper"].items()},
    published="published.json",
    probe_keys=PROBE_KEYS,
    category_key=CATEGORY_KEY,
    package=__name__,
    sections=(
        Section(
            "published", "Published figures", lambda context: _views().section(BENCHMARK, context)
        ),
    ),
    set_apart=is_adversarial,
    set_apart_note="LoCoMo adversarial",
    answer_scores=(AnswerScore("f1_locomo", f1.score),),
    metrics=(
        Metric(
            "f1_locomo",
            "F1 LoCoMo",
            "F1 LoCoMo",
            "score",
            PROBES,
            needs=(ANSWERING_MODEL,),
            table=False,  # the field metrics section's
            source="LoCoMo's own (task_eval/evaluation.py: Porter stems, multiset overlap, its "
            "per-category rules)",
        ),
    ),
)


def _views():
    from memory_lab.benchmarks.locomo import views  # the report's kit: when a view is drawn

    return views
