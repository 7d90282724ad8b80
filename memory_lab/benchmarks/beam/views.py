"""What BEAM adds to the views: the report's section (BEAM's scores by memory, scale and ability,
with the published figures at the run's scales) and the headline's line (BEAM's own score per
memory, naming who graded it, and why it ranks nothing when its declaration is not met)."""

from __future__ import annotations

from typing import Any

from memory_lab.benchmarks.declaration import ViewContext
from memory_lab.scoring.metrics import ANSWERING_MODEL, JUDGE, RunFacts
from memory_lab.views.html_kit import escape, percent, table
from memory_lab.views.numbers import is_missing

OFFLINE_BEAM_GRADING = (
    "graded offline: only value nuggets, by answer matching, the rest ungraded; no judge model"
)
# Why BEAM's score ranks nothing, by what its declaration needs and the run lacked.
BEAM_UNRANKED = {
    ANSWERING_MODEL: "the replies it grades are the offline reader's (a stand-in)",
    JUDGE: "no judge model graded them (memory-lab score beam --judge MODEL --prompts BEAM)",
}


def scored_rows(context: ViewContext) -> list[dict[str, Any]] | None:
    """The question rows of each run's ``beam_scores.csv`` (``memory-lab score beam``), each
    memory labelled as the views label it; None when no run has one."""
    from memory_lab.benchmarks.beam.scores import read_scores

    rows, found = [], False
    for run, name in zip(context.runs, context.names, strict=True):
        mine = read_scores(run.path)
        found = found or mine is not None
        rows += [{**r, "memory": context.labelled(name, r["memory"])} for r in mine or []]
    return rows if found else None


def _judge_label(judges: list[str]) -> str:
    """How a BEAM table's scores were graded, for its headings: ``offline`` or the judge."""
    return " + ".join(judges) if judges else "offline"


def section(context: ViewContext) -> str | None:
    """Runs over BEAM: BEAM's scores by memory, scale and ability, the run's evidence recall
    beside them, and the published figures at the run's scales, labelled as such. The scores are
    those ``memory-lab score beam`` wrote (from ``beam_scores.csv``: a judge model's or
    offline), else the offline judge's, computed here (value nuggets only, labelled offline)."""
    from memory_lab.benchmarks.beam.grading import OfflineBeamGrader
    from memory_lab.benchmarks.beam.judge import PROTOCOLS
    from memory_lab.benchmarks.beam.scores import (
        OFFLINE_LABEL,
        published_rows,
        score_probes,
        table_rows,
    )

    probes = context.combined.probes
    scored = scored_rows(context)
    if scored:
        rows = scored
    elif probes.empty or "probe_metadata" not in probes:
        return None
    else:
        rows = score_probes(probes, OfflineBeamGrader(), PROTOCOLS)
    if not rows:
        return None
    judges = sorted({str(r.get("judge") or "unknown") for r in rows})
    models = [j for j in judges if j != "offline"]
    protocols = list(dict.fromkeys(r["protocol"] for r in rows))
    body = [
        [
            escape(t["memory"]),
            escape(t["scale"]),
            escape(t["ability"]),
            *(percent(v) for v in t["scores"].values()),
            f"{t['graded']}/{t['items']}",
            percent(t["recall"]),
            f"{t['with_evidence']}/{t['probes']}",
        ]
        for t in table_rows(rows)
    ]
    label = _judge_label(judges)
    header = ["memory", "scale", "ability", *(f"BEAM {p} ({label})" for p in protocols)]
    header += ["rubric items graded", "evidence recall", "probes with evidence"]
    published = [
        [escape(r["scale"]), escape(r["system"]), f"{r['score']:.1f}%", escape(r["source"])]
        for r in published_rows(sorted({r["scale"] for r in rows}))
    ]
    source = "from beam_scores.csv (memory-lab score beam)" if scored else "computed offline"
    if models == judges:
        about = f"Graded by the judge model {', '.join(models)} with BEAM's rubric prompt, {source}"
        about += "."
    else:
        about = (
            f"{OFFLINE_LABEL}, {source}: a partial, offline measure; evidence recall is the "
            "offline headline. memory-lab score beam --judge MODEL gives BEAM's judged scores."
        )
    return (
        '<h2 id="beam">BEAM by ability</h2>'
        + f"<p class=note>{escape(about)}</p>"
        + table(header, body, 'class="num" id=beam-table')
        + "<h3>Published BEAM figures (vendors' own numbers, other models, judges and "
        "protocols; not comparable digit for digit)</h3>"
        + table(["scale", "system", "score", "source"], published, "id=published-beam")
    )


def headline(context: ViewContext) -> str | None:
    """BEAM's line in the headline: ``beam_line`` of the scores ``memory-lab score beam`` wrote;
    None without them."""
    from memory_lab.benchmarks.beam.scores import overall_scores

    rows = scored_rows(context)
    return beam_line(overall_scores(rows), context.facts) if rows else None


def beam_line(overall: list[dict], facts: RunFacts) -> str | None:
    """BEAM's own score per memory (``beam_scores.overall_scores`` of the ``beam_scores.csv``
    that ``memory-lab score beam`` wrote), best first, naming who graded it (a judge model, or
    offline: value nuggets only) and each protocol; when its declaration (``BEAM_SCORE``)
    is not met, why it ranks nothing. None without BEAM scores."""
    if not overall:
        return None
    from memory_lab.benchmarks.beam.metric import BEAM_SCORE

    beam = BEAM_SCORE
    judges = sorted({j for r in overall for j in r["judges"]})
    models = [j for j in judges if j not in ("offline", "unknown")]
    graded = []
    if models:
        graded.append(f"graded by the judge model {', '.join(models)} with BEAM's rubric prompt")
    if "offline" in judges:
        graded.append(OFFLINE_BEAM_GRADING)
    if "unknown" in judges:
        graded.append("graded by a judge the scores do not name")
    scored = RunFacts(facts.real_answering_model, models == judges, facts.evidence)
    several_scales = len({r["scale"] for r in overall}) > 1
    counts = {(r["abilities"], r["of"]) for r in overall}
    if len(counts) == 1:
        ((k, of),) = counts
        over = f"mean over its {k} abilities" if k == of else f"mean over the {k} of {of} abilities"
        over += " with a score" if k != of else ""
    else:
        over = "mean over the abilities with a score"

    def scores(protocol: str) -> list[str]:
        rows = [r for r in overall if r["protocol"] == protocol]
        rows.sort(key=lambda r: (is_missing(r["score"]), -(r["score"] or 0)))
        return [
            f"{r['memory']}{' @ ' + r['scale'] if several_scales else ''} {percent(r['score'])}"
            + (f" ({r['abilities']}/{r['of']} abilities)" if len(counts) > 1 else "")
            for r in rows
        ]

    protocols = list(dict.fromkeys(r["protocol"] for r in overall))
    shown = {p: ", ".join(scores(p)) for p in protocols}
    if len(set(shown.values())) == 1:
        named = " and ".join(protocols)
        body = f"{named} protocol{'s alike' if len(protocols) > 1 else ''}: {shown[protocols[0]]}"
    else:
        body = "; ".join(f"{p} protocol: {shown[p]}" for p in protocols)
    line = f"{beam.title.split(' (')[0]} ({'; '.join(graded)}), {over}, {body}."
    missing = beam.missing(scored)
    if missing:
        line += " It ranks nothing here: " + "; ".join(BEAM_UNRANKED[m] for m in missing) + "."
    return line
