"""What a benchmark declares, once, as ``BENCHMARK`` in its package's ``__init__``: how its data
is imported, what its probes' metadata holds, how a run over it is scored its authors' way, and
what the report and the headline add for it. The shared stages (``run/``, ``scoring/``,
``results/``, ``log/``, ``views/``) read these declarations and name no benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ScoreRequest:
    """One ``memory-lab score BENCHMARK RUN`` (or ``memory_lab.benchmarks.score``): the run's
    folder, the judge (``offline`` or ``PROVIDER:MODEL``), the protocols, where the authors'
    prompts are read from (a checkout of theirs), an OpenAI-compatible ``base_url``, an output
    file for every verdict, and a folder the retrieval rankings are exported to."""

    results_dir: Path
    judge: str = "offline"
    protocols: tuple[str, ...] = ()
    prompts: Path | None = None
    base_url: str | None = None
    out: Path | None = None
    export_retrieval: Path | None = None


@dataclass
class ScoreOutcome:
    """What scoring printed and wrote: ``text`` (the table), ``files`` written, the judge's
    ``account`` (calls, tokens, cost) when a judge model graded."""

    text: str
    files: list[Path] = field(default_factory=list)
    account: Any = None


@dataclass(frozen=True)
class Scorer:
    """How a run over the benchmark is scored its authors' way.

    ``score``: the function (``ScoreRequest -> ScoreOutcome``); ``protocols``: the protocols it
    knows, ``reference`` (the authors' code as it is) first, and where that has a defect a
    corrected one beside it; ``default_protocols``: those scored when none is named (all, when
    None); ``offline``: whether it grades without a judge model (``--judge offline``);
    ``prompts``: what ``--prompts`` reads (None: it needs no prompt); ``writes``: the file it
    writes into the run's folder; ``account``: the name of the judge's account it writes beside
    it (``<account>.judge.json``, ``results/judge_costs.py``); ``exports``: the extra outputs
    it can write (``retrieval``: ``--export-retrieval DIR``)."""

    score: Callable[[ScoreRequest], ScoreOutcome]
    writes: str
    account: str = ""
    protocols: tuple[str, ...] = ("reference",)
    default_protocols: tuple[str, ...] | None = None
    offline: bool = False
    prompts: str | None = None
    exports: tuple[str, ...] = ()
    about: str = ""


@dataclass(frozen=True)
class ViewContext:
    """What a benchmark's report section and headline line see of one or several runs:
    ``runs`` (``memory_lab.results.read.Results``) and their ``names`` (several runs label
    their memories ``run/memory``), the ``combined`` results, the ``summary`` per memory and the
    run's ``facts`` (``memory_lab.scoring.metrics.RunFacts``: what its figures can rank)."""

    runs: list[Any]
    names: list[str]
    combined: Any
    summary: Any
    facts: Any

    def labelled(self, name: str, memory: str) -> str:
        """A memory's label in the views: ``run/memory`` when several runs are compared."""
        return f"{name}/{memory}" if len(self.runs) > 1 else memory


@dataclass(frozen=True)
class Section:
    """A section the benchmark adds to the HTML report: its anchor ``id``, its ``title`` (the
    report's contents list) and ``render(context) -> html or None`` (None: nothing for this run;
    ``context``: a ``ViewContext``)."""

    id: str
    title: str
    render: Callable[[Any], str | None]


@dataclass(frozen=True)
class Benchmark:
    """A foreign dataset and its scoring, declared once.

    ``name``: the FORMAT of ``FORMAT:PATH`` sources and the BENCHMARK of ``memory-lab score``;
    ``categories``: the dataset's own categories and the memory-lab category each becomes
    (``memory_lab.dialogue.model.CATEGORIES``); ``probe_keys``: every key its importer writes in a
    probe's metadata, named as constants in its package (readers import those names);
    ``category_key``: the one of them holding the dataset's own category (the table by
    category's ``source_category``); ``scorer``: how ``memory-lab score`` scores a run over it;
    ``published``: the file of other systems' published figures in its package folder;
    ``sections``: what it adds to the report; ``headline``: its line in a run's headline
    (``(context) -> str or None``); ``set_apart``: which of its probes are summarised apart
    (``(probe metadata) -> bool``: LoCoMo's adversarial traps), with ``set_apart_note``
    saying so after a run; ``answer_scores``: scores of every probe's reply it declares
    (``memory_lab.scoring.answers.AnswerScore``: its F1); ``metrics``: summary columns it declares
    (``memory_lab.scoring.metrics.Metric``); ``exports``: other commands' outputs
    (``memory-lab export NAME``: ``(results_dir, out, memory) -> count``)."""

    name: str
    importer: Callable[..., Any]
    origin: str  # where a user gets it: none is shipped
    licence: str
    docs: str
    categories: dict[str, str]
    title: str = ""
    probe_keys: tuple[str, ...] = ()
    category_key: str | None = None
    scorer: Scorer | None = None
    published: str | None = None
    package: str = ""
    sections: tuple[Section, ...] = ()
    headline: Callable[[Any], str | None] | None = None
    set_apart: Callable[[Mapping[str, Any]], bool] | None = None
    set_apart_note: str = ""
    answer_scores: tuple[Any, ...] = ()
    metrics: tuple[Any, ...] = ()
    exports: Mapping[str, Callable[..., int]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.title or self.name

    def covers(self, probes: Any) -> bool:
        """Whether any of a run's probe records (a frame with ``probe_metadata``) came from
        this benchmark's importer (their metadata keeps its ``category_key``)."""
        if self.category_key is None or probes.empty or "probe_metadata" not in probes:
            return False
        key = self.category_key
        return any(isinstance(m, dict) and key in m for m in probes["probe_metadata"])

    def published_figures(self) -> dict[str, Any] | None:
        """The bundled published figures (``published`` in the package folder), or None."""
        if not self.published:
            return None
        import json
        from importlib import resources

        text = (resources.files(self.package) / self.published).read_text("utf-8")
        return json.loads(text)
