"""LongMemEval (Wu et al., 2024): chat histories with questions of six types and abstentions,
scored by its own judge on the hypotheses memory-lab exports (docs/importers.md)."""

from memory_lab.benchmarks.declaration import Benchmark
from memory_lab.benchmarks.longmemeval.importer import (
    PROBE_KEYS,
    QUESTION_TYPE_KEY,
    QUESTION_TYPES,
    import_longmemeval,
)

BENCHMARK = Benchmark(
    title="LongMemEval",
    name="longmemeval",
    importer=import_longmemeval,
    origin="LongMemEval is not shipped: longmemeval_s_cleaned.json and the other files come "
    "with the xiaowu0162/LongMemEval release on GitHub",
    licence="the xiaowu0162/LongMemEval repository's code is MIT; its data comes with its "
    "release: not shipped",
    docs="docs/importers.md",
    categories={**QUESTION_TYPES, "(question id ending _abs)": "abstention"},
    probe_keys=PROBE_KEYS,
    category_key=QUESTION_TYPE_KEY,
    package=__name__,
    exports={"longmemeval": lambda *args, **kw: _export().export_hypotheses(*args, **kw)},
)


def _export():
    from memory_lab.benchmarks.longmemeval import export  # reads results: when exporting

    return export
