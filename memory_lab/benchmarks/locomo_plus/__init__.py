"""LoCoMo-Plus (Li et al., 2025): cognitive memory cues inserted into LoCoMo's conversations,
scored by its Cognitive judge (docs/locomo-plus.md)."""

from memory_lab.benchmarks.declaration import Benchmark, Scorer
from memory_lab.benchmarks.locomo_plus.importer import (
    PROBE_KEYS,
    RELATION_TYPE_KEY,
    import_locomo_plus,
)

BENCHMARK = Benchmark(
    title="LoCoMo-Plus",
    name="locomo-plus",
    importer=import_locomo_plus,
    origin="LoCoMo-Plus is not shipped: data/locomo_plus.json (with locomo10.json) is in the "
    "xjtuleeyf/Locomo-Plus repository on GitHub",
    licence="the xjtuleeyf/Locomo-Plus repository carries no licence: not shipped",
    docs="docs/locomo-plus.md",
    categories={"cognitive": "cognitive"},
    probe_keys=PROBE_KEYS,
    category_key=RELATION_TYPE_KEY,
    package=__name__,
    scorer=Scorer(
        score=lambda request: _judge().score(request),
        writes="locomo_plus_verdicts.json",
        account="judge-cognitive",
        prompts="your Locomo-Plus checkout (or its evaluation_framework/task_eval/prompt.py): "
        "the Cognitive prompt",
        about="the Cognitive judge: correct 1, partial 0.5, wrong 0, as the reference's "
        "llm_as_judge.py",
    ),
)


def _judge():
    from memory_lab.benchmarks.locomo_plus import judge  # the judge core: when scoring

    return judge
