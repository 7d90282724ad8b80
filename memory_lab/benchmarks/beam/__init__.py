"""BEAM (Tavakoli et al., 2025): long conversations at 100K-10M tokens, probed by ten memory
abilities, scored by its rubric judge and event-ordering Kendall tau-b (docs/beam.md)."""

from memory_lab.benchmarks.beam.importer import ABILITY_KEY, CATEGORIES, PROBE_KEYS, import_beam
from memory_lab.benchmarks.beam.metric import BEAM_SCORE
from memory_lab.benchmarks.declaration import Benchmark, Scorer, Section

BENCHMARK = Benchmark(
    title="BEAM",
    name="beam",
    importer=import_beam,
    origin="BEAM is not shipped: its chats/ folder is in the mohammadtavakoli78/BEAM repository "
    "on GitHub",
    licence="the mohammadtavakoli78/BEAM repository carries no licence: not shipped",
    docs="docs/beam.md",
    categories=dict(CATEGORIES),
    published="published.json",
    probe_keys=PROBE_KEYS,
    category_key=ABILITY_KEY,
    package=__name__,
    metrics=(BEAM_SCORE,),
    sections=(Section("beam", "BEAM by ability", lambda context: _views().section(context)),),
    headline=lambda context: _views().headline(context),
    scorer=Scorer(
        score=lambda request: _scores().score(request),
        writes="beam_scores.csv",
        account="beam-scores",
        protocols=("reference", "corrected"),
        offline=True,
        prompts="your BEAM copy (or a folder inside it): src/prompts.py and "
        "src/evaluation/compute_metrics.py hold the judge's prompts",
        about="rubric judge and event-ordering tau-b, per ability and scale; reference: BEAM's "
        "code as it is (<question> not filled in, 0.5 read as 0); corrected: question filled "
        "in, 0.5 kept",
    ),
)


def _scores():
    from memory_lab.benchmarks.beam import scores  # pandas and the judge: when scoring

    return scores


def _views():
    from memory_lab.benchmarks.beam import views  # the report's kit: when a view is drawn

    return views
