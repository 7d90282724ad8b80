"""Every figure of a run's summary, declared once: its column, its labels, which way is better,
its unit, how it aggregates and what it needs to mean anything.

What a figure needs decides whether it may rank memories for a run (``Metric.meaningful``):

- ``ANSWERING_MODEL``: the answering model's replies are scored, so the figure measures a real
  model only; with the offline reader (an extractive stand-in, tuned on the built-in suite) it
  measures the instrument. On a long benchmark the reader scored every memory alike (5.6%)
  while evidence recall ran from 31% to 63%: such a figure must not say which memory is best.
- ``JUDGE``: a real LLM judge graded the replies (the offline judge is a stand-in too; for
  a benchmark's own score, the judge of ``memory-lab score``, whose offline grading may read
  part of it only).
- ``EVIDENCE``: the probes name their evidence turns.

The answer a report leads with, the cost frontier and the viewer's comparison rank by the
first of ``RANKING`` that is meaningful for the run (``lead_metric``): J with a real model and
judge, recall with a real model, evidence recall otherwise. The summary's tables, the report
and the viewer take labels and directions from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_lab.scoring.ranks import RANK_SCORES

ANSWERING_MODEL = "a real answering model"
JUDGE = "a real judge"
EVIDENCE = "evidence turns"

PROBES = "answerable probes with answers to match"  # what recall is over


@dataclass(frozen=True)
class RunFacts:
    """What a run (or runs compared) had: a real answering model (not the offline reader), a
    real judge (not the offline one) that graded it, probes with evidence turns."""

    real_answering_model: bool
    real_judge: bool
    evidence: bool

    def has(self, need: str) -> bool:
        return {
            ANSWERING_MODEL: self.real_answering_model,
            JUDGE: self.real_judge,
            EVIDENCE: self.evidence,
        }[need]


@dataclass(frozen=True)
class Metric:
    """One summary column (or a benchmark's score, scored after the run). ``unit``: ``share`` (0-1,
    shown as a percent), ``score`` (0-1, shown with three decimals), ``tokens``, ``usd``,
    ``seconds``, ``ms`` or ``count``: how every view writes it (``views/tables.metric_text`` for the
    terminal and the report, ``SHOW`` in ``data/viewer.html``). ``interval``: the columns of its
    95% interval; ``spread``: the column of its sd over judge runs. ``table``: a column of the
    summary table the terminal and the report print (the others have blocks of their own: J and
    the field's scores the judge's and the metrics section, latency its block); ``compared``: a
    column of the viewer's comparison. A figure declared here with its column in the summary is
    in all three."""

    name: str
    label: str  # the tables' heading
    title: str  # how the answer names it
    unit: str
    over: str  # what it aggregates over
    higher_is_better: bool = True
    needs: tuple[str, ...] = ()
    interval: tuple[str, str] | None = None
    spread: str | None = None
    table: bool = True  # a column of the summary table (terminal and report)
    compared: bool = True  # a column of the viewer's comparison (the rank scores are not)
    source: str = ""  # whose definition it is, where a benchmark declares it

    @property
    def heading(self) -> str:
        """The column's heading in every view: its label, and what its interval is."""
        return self.label + (" (95% CI)" if self.interval else "")

    @property
    def hint(self) -> str:
        """What a column's heading says on hover: what it is over, which way is better and
        what it needs to mean anything."""
        better = "higher" if self.higher_is_better else "lower"
        needs = f"; needs {' and '.join(self.needs)} to mean anything" if self.needs else ""
        return f"{self.title}: over {self.over}; {better} is better{needs}"

    @property
    def noun(self) -> str:
        """The figure's name in a sentence: "evidence recall", "recall", "J"."""
        name = self.title.split(" (")[0]
        return name if name.isupper() else name.lower()

    def meaningful(self, facts: RunFacts) -> bool:
        """Whether the figure measures the memories in a run with these facts."""
        return all(facts.has(need) for need in self.needs)

    def missing(self, facts: RunFacts) -> list[str]:
        """What the run lacked for this figure to mean anything (empty when it is meaningful)."""
        return [need for need in self.needs if not facts.has(need)]


def _share(name: str, label: str, title: str, over: str, *needs: str, **kw) -> Metric:
    return Metric(name, label, title, "share", over, needs=needs, **kw)


def _score(name: str, label: str, title: str) -> Metric:  # the field's: in the judge's block
    return Metric(name, label, title, "score", PROBES, needs=(ANSWERING_MODEL,), table=False)


METRICS: tuple[Metric, ...] = (
    Metric("answerable", "answerable", "Answerable probes", "count", "probes with an answer"),
    _share(
        "evidence_recall",
        "evid-recall",
        "Evidence recall (retrieval)",
        "answerable probes with evidence",
        EVIDENCE,
    ),  # fmt: skip
    _share(
        "context_hit_rate",
        "ans-in-ctx",
        "Answer in context",
        "answerable probes whose answer can be matched verbatim",
    ),  # fmt: skip
    _share(
        "judge_accuracy",
        "J",
        "J (the judge's accuracy)",
        PROBES,
        ANSWERING_MODEL,
        JUDGE,
        spread="judge_accuracy_sd",
        table=False,  # the judge's block, beside its agreement
    ),  # fmt: skip
    _share(
        "accuracy",
        "recall",
        "Recall",
        PROBES,
        ANSWERING_MODEL,
        interval=("accuracy_low", "accuracy_high"),
    ),  # fmt: skip
    _share("abstention_accuracy", "abstain", "Abstention", "abstention probes", ANSWERING_MODEL),
    Metric(
        "stale_rate",
        "stale",
        "Stale answers",
        "share",
        "probes with a superseded answer",
        higher_is_better=False,
        needs=(ANSWERING_MODEL,),
    ),  # fmt: skip
    _score("f1_mem0", "F1 mem0", "F1 (mem0's)"),
    _score("bleu1", "BLEU-1", "BLEU-1"),
    _score("exact_match", "EM", "Exact match"),
    *(
        Metric(
            name,
            name,
            name,
            "score",
            "answerable probes with evidence",
            needs=(EVIDENCE,),
            table=False,
            compared=False,
        )
        for name in RANK_SCORES
    ),
    Metric(
        "mean_prompt_tokens",
        "prompt/turn",
        "Prompt tokens per turn",
        "tokens",
        "user turns",
        higher_is_better=False,
        compared=False,  # the viewer shows tokens per query
    ),  # fmt: skip
    Metric(
        "tokens_per_query",
        "tokens/query",
        "Prompt tokens per query",
        "tokens",
        "probes",
        higher_is_better=False,
        table=False,  # the latency block
    ),  # fmt: skip
    Metric(
        "memory_tokens", "mem tokens", "Memory tokens", "tokens", "the run", higher_is_better=False
    ),  # fmt: skip
    Metric(
        "total_tokens", "total tokens", "Total tokens", "tokens", "the run", higher_is_better=False
    ),  # fmt: skip
    Metric(
        "est_cost_usd", "est. cost $", "Estimated cost", "usd", "the run", higher_is_better=False
    ),  # fmt: skip
    Metric(
        "seconds",
        "sec",
        "The memory's own seconds",
        "seconds",
        "its turns and probe reads",
        higher_is_better=False,
    ),  # fmt: skip
    Metric(
        "search_seconds_p95",
        "search p95",
        "Search time, 95th percentile",
        "seconds",
        "probes (the memory's read)",
        higher_is_better=False,
        table=False,  # the latency block
    ),  # fmt: skip
)
BY_NAME = {m.name: m for m in METRICS}
# The figures that may lead the answer, in order: the first meaningful one leads.
RANKING = ("judge_accuracy", "accuracy", "evidence_recall")


def compared() -> list[dict]:
    """The declarations of the viewer's comparison columns, in order, as JSON for its page."""
    return [
        {
            "name": m.name,
            "label": m.label,
            "heading": m.heading,
            "hint": m.hint,
            "title": m.title,
            "unit": m.unit,
            "over": m.over,
            "higher_is_better": m.higher_is_better,
            "needs": list(m.needs),
            "interval": list(m.interval) if m.interval else None,
            "spread": m.spread,
        }
        for m in all_metrics()
        if m.compared
    ]


def benchmark_metrics() -> list[Metric]:
    """The figures the benchmarks declare (``Benchmark.metrics``), in their order."""
    from memory_lab.benchmarks import benchmarks

    return [m for b in benchmarks().values() for m in b.metrics if m.name not in BY_NAME]


def all_metrics() -> tuple[Metric, ...]:
    """Every declared figure in the views' order: those declared here, with the benchmarks'
    (``Benchmark.metrics``) first among the field's answer scores, as the records order them."""
    declared = benchmark_metrics()
    at = [m.name for m in METRICS].index("f1_mem0")
    return (*METRICS[:at], *declared, *METRICS[at:])


def metric(name: str) -> Metric:
    """The declaration of the summary column ``name``, or of a figure a benchmark declares
    (``Benchmark.metrics``: a score written after the run, such as its judge's)."""
    if name in BY_NAME:
        return BY_NAME[name]
    for m in all_metrics():
        if m.name == name:
            return m
    raise KeyError(name)


def lead_metric(facts: RunFacts, present: set[str] | None = None) -> Metric | None:
    """The first of ``RANKING`` meaningful for a run with these ``facts`` (and, given the
    columns ``present`` with a value, one the summary has); None when none is."""
    for name in RANKING:
        m = BY_NAME[name]
        if m.meaningful(facts) and (present is None or name in present):
            return m
    return None
