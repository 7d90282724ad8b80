"""BEAM's own scores (docs/beam.md), as its ``src/evaluation/compute_metrics.py`` computes them.

- **Rubric judge.** Every rubric item of a question is graded by a judge model with BEAM's
  ``unified_llm_judge_base_prompt`` (``<rubric_item>`` and ``<llm_response>`` replaced, in that
  order): its JSON output's ``score`` (1, 0.5 or 0) is read as the reference reads it
  (``parse_judge_output``) and the question's score is the mean over its items.
- **Event ordering** is scored by Kendall's τ-b, normalised to [0, 1]: the reply's lines are
  aligned to the rubric's items by the judge's YES/NO equivalence (the first unused item that is
  equivalent replaces the line), both lists become ranks over their union (an item missing from
  a list is tied last) and τ-b is computed with ties (``kendall_tau_b``, as
  ``scipy.stats.kendalltau(variant="b")``). Undefined τ (a constant ranking) is NaN, as there.
- **Per ability**: BEAM's report averages each ability's questions per conversation, then the
  conversations: the judge mean, except for event ordering, where it is the normalised τ-b.

The judge is two protocols on the judge core (``scoring/judge_core.py``): ``BeamRubric`` (the
rubric prompt, its JSON read by ``parse_judge_output``) and ``BeamEquivalence`` (the YES/NO
check). Its model goes through the run's call cache (``results.judge_costs.RunJudging``), so
scoring a run again sends no request; every question's row names the judge and its prompt's
SHA-256 and counts its calls and tokens, and the judge's account (tokens, estimated cost) is
written beside ``beam_scores.csv`` (``write_scores``).

Two BEAM protocols. ``reference`` reproduces the reference code's quirks: ``<question>`` is never
substituted into the judge prompt, and ``int(score)`` turns 0.5 into 0 (event ordering's judge
mean uses ``float``, as there). ``corrected`` substitutes the question and keeps 0.5.

BEAM's repository has no licence, so its prompt texts are not bundled: ``load_beam_prompts``
reads them from the user's BEAM copy (``src/prompts.py`` and ``src/evaluation/
compute_metrics.py``), parsing the Python source without running it.

With the offline judge (``OfflineBeamGrader``) only rubric items whose nugget is a short value
(``LLM response should state: March 29``) are graded, by the project's answer matching; the rest
are *ungraded*, not zero, and a question with no graded item has no score. Its τ-b alignment
counts a line as equivalent to an item when the item's text is found in it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_lab.benchmarks.beam.grading import LLMBeamGrader, score_question
from memory_lab.benchmarks.beam.importer import (
    ABILITIES,
    ABILITY_KEY,
    RUBRIC_KEY,
    SCALE_KEY,
)
from memory_lab.benchmarks.beam.judge import BeamRubric
from memory_lab.benchmarks.declaration import ScoreOutcome, ScoreRequest
from memory_lab.errors import BadInput
from memory_lab.log.safe_files import open_new
from memory_lab.models.accounting import Usage

SCORES_FILE = "beam_scores.csv"
PUBLISHED = "memory_lab/benchmarks/beam/published.json"
SCORER = "beam-scores"  # names the judge's account in the results folder (results.judge_costs)


def ability_means(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    """BEAM's report: per (memory, scale, ability), the mean over conversations of each
    conversation's mean question score (questions without a score left out; NaN kept, as the
    reference's mean would). ``rows`` have memory, scale, conversation, ability and score."""
    per_conv: dict[tuple[str, str, str, str], list[float]] = {}
    for r in rows:
        if r["score"] is not None and r["ability"] in ABILITIES:
            key = (r["memory"], r["scale"], r["ability"], r["conversation"])
            per_conv.setdefault(key, []).append(float(r["score"]))
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for (memory, scale, ability, _), values in per_conv.items():
        grouped.setdefault((memory, scale, ability), []).append(sum(values) / len(values))
    return {key: sum(v) / len(v) for key, v in grouped.items()}


def score_run(
    results_dir: str | Path, grader: Any, protocols: Sequence[str], template: str = ""
) -> list[dict[str, Any]]:
    """``score_probes`` of a results folder; BadInput when the run has no BEAM probe."""
    from memory_lab.results.read import read_results

    rows = score_probes(read_results(results_dir).probes, grader, protocols, template)
    if not rows:
        raise BadInput(f"{results_dir}: no BEAM probes in this run")
    return rows


def score_probes(
    probes: Any, grader: Any, protocols: Sequence[str], template: str = ""
) -> list[dict[str, Any]]:
    """Every BEAM probe of a run's probe table scored under each protocol: one row per (probe,
    protocol) with memory, scale, conversation, ability, probe, protocol, score, judge_score,
    tau_norm, graded, items, the run's evidence_recall, and the judge's columns
    (``judge_columns``)."""
    rows = []
    for _, p in probes.iterrows() if not probes.empty else ():
        meta = p.get("probe_metadata")
        if not isinstance(meta, dict) or meta.get(ABILITY_KEY) not in ABILITIES:
            continue
        rubric = [str(r) for r in meta.get(RUBRIC_KEY) or []]
        for protocol in protocols:
            before = grader.usage()
            q = score_question(
                meta[ABILITY_KEY],
                p["question"],
                rubric,
                p["reply"] or "",
                grader,
                protocol,
                template,
            )
            rows.append(
                {
                    "memory": p["memory"],
                    "scale": str(meta.get(SCALE_KEY, "unknown")),
                    "conversation": p["dialogue"],
                    "ability": q.ability,
                    "probe": p["probe_id"],
                    "protocol": protocol,
                    "score": q.score,
                    "judge_score": q.judge_score,
                    "tau_norm": q.tau_norm,
                    "graded": q.graded,
                    "items": len(q.grades),
                    "evidence_recall": _number(p.get("evidence_recall")),
                    **judge_columns(grader, grader.usage() - before),
                }
            )
    return rows


def judge_columns(grader: Any, spent: Usage) -> dict[str, Any]:
    """A question's judge columns: the judge (``offline`` or its model string), the SHA-256 of
    its rubric prompt (empty offline), and the calls (cache hits among them) and tokens its
    scoring took (``spent``)."""
    rubric = next((p for p in grader.protocols if isinstance(p, BeamRubric)), None)
    return {
        "judge": grader.name,
        "judge_prompt_sha256": rubric.prompt_sha256 if rubric is not None else "",
        "judge_calls": spent.llm_calls,
        "judge_cache_hits": spent.cache_hits,
        "judge_input_tokens": spent.input_tokens,
        "judge_output_tokens": spent.output_tokens,
    }


def write_scores(
    results_dir: str | Path, rows: Sequence[dict[str, Any]], grader: Any
) -> tuple[Path, dict[str, Any] | None]:
    """``rows`` written to ``beam_scores.csv`` in the results folder, and the judge's account
    beside it (``judge_costs.write_account``: its model, prompts' SHA-256, calls, tokens and
    estimated cost; an offline grading removes a model judge's earlier one). (The CSV's path,
    the account; None offline.)"""
    import csv

    from memory_lab.results.judge_costs import write_account

    out = Path(results_dir) / SCORES_FILE
    with open_new(out, "w", newline="") as fh:  # never through a link (log/safe_files.py)
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    judge = grader.judge if isinstance(grader, LLMBeamGrader) else None
    return out, write_account(results_dir, SCORER, judge, grader.protocols)


_FLOATS = ("score", "judge_score", "tau_norm", "evidence_recall")
_INTS = ("graded", "items", "judge_calls", "judge_cache_hits")
_INTS += ("judge_input_tokens", "judge_output_tokens")


def read_scores(results_dir: str | Path) -> list[dict[str, Any]] | None:
    """The rows ``write_scores`` wrote to ``beam_scores.csv`` in the results folder, numbers read
    back as numbers (an empty cell: None; ``nan``, an undefined τ, stays NaN, as BEAM keeps it);
    None when the folder has no such file (``memory-lab beam-scores`` has not scored the run)."""
    import csv
    import io

    from memory_lab.results.read import ResultsError, open_in_folder
    from memory_lab.text.limits import MAX_RUN_FILE_BYTES

    path = Path(results_dir) / SCORES_FILE
    if not path.exists() and not path.is_symlink():
        return None
    # a crafted folder's file is refused in one line: no pipe waited on, no link followed
    with open_in_folder(path, MAX_RUN_FILE_BYTES, "MAX_RUN_FILE_BYTES") as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline="")))
    for line, r in enumerate(rows, start=2):
        for key in (*_FLOATS, *_INTS):
            if key not in r:
                continue
            try:
                if key in _FLOATS:
                    r[key] = None if r[key] in ("", None) else float(r[key])
                else:
                    r[key] = int(r[key] or 0)
            except (TypeError, ValueError):
                message = f"{path}: line {line}: {key}: not a number: {r[key]!r:.40}"
                raise ResultsError(message) from None
    return rows


def overall_scores(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """BEAM's overall score per protocol, memory and scale, as its papers report it: the mean
    over abilities of each ability's score (``ability_means``), with how many abilities had
    one (``abilities``, of ``of``; ``score`` None when none had); ``judges``: who graded them."""
    out = []
    for protocol in dict.fromkeys(r["protocol"] for r in rows):
        mine = [r for r in rows if r["protocol"] == protocol]
        means = ability_means(mine)
        for memory, scale in dict.fromkeys((r["memory"], r["scale"]) for r in mine):
            values = [v for (m, s, _), v in means.items() if (m, s) == (memory, scale)]
            theirs = [r for r in mine if (r["memory"], r["scale"]) == (memory, scale)]
            judges = {r.get("judge") or "unknown" for r in theirs}
            out.append(
                {
                    "protocol": protocol,
                    "memory": memory,
                    "scale": scale,
                    "score": sum(values) / len(values) if values else None,
                    "abilities": len(values),
                    "of": len(ABILITIES),
                    "judges": sorted(judges),
                }
            )
    return out


def _number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def table_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per memory, scale and ability (then ``mean``, over abilities, as BEAM's papers report
    it; ``mean (k/10 abilities)`` when only k have a score): the BEAM score of each protocol
    (None: nothing graded), the rubric items graded and the run's evidence recall (``recall``:
    mean over probes with evidence; ``with_evidence``)."""
    protocols = list(dict.fromkeys(r["protocol"] for r in rows))
    means = {p: ability_means([r for r in rows if r["protocol"] == p]) for p in protocols}
    out = []
    for memory, scale in dict.fromkeys((r["memory"], r["scale"]) for r in rows):
        mine = [
            r
            for r in rows
            if (r["memory"], r["scale"], r["protocol"]) == (memory, scale, protocols[0])
        ]
        for ability in [*ABILITIES, "mean"]:
            scores, scored = {}, 0
            for p in protocols:
                if ability == "mean":
                    vals = [v for (m, s, _), v in means[p].items() if (m, s) == (memory, scale)]
                    scores[p] = sum(vals) / len(vals) if vals else None
                    scored = max(scored, len(vals))
                else:
                    scores[p] = means[p].get((memory, scale, ability))
            these = [r for r in mine if ability == "mean" or r["ability"] == ability]
            recalls = [r["evidence_recall"] for r in these if r.get("evidence_recall") is not None]
            out.append(
                {
                    "memory": memory,
                    "scale": scale,
                    "ability": ability
                    if ability != "mean" or scored == len(ABILITIES)
                    else f"mean ({scored}/{len(ABILITIES)} abilities)",
                    "scores": scores,
                    "graded": sum(r["graded"] for r in these),
                    "items": sum(r["items"] for r in these),
                    "recall": sum(recalls) / len(recalls) if recalls else None,
                    "with_evidence": len(recalls),
                    "probes": len(these),
                }
            )
    return out


OFFLINE_LABEL = "OFFLINE: only value nuggets graded, by answer matching, the rest ungraded"


def format_beam_table(rows: Sequence[dict[str, Any]], judge: str) -> str:
    """``table_rows`` as text: per memory and scale, each ability's BEAM score under each
    protocol (percent), the rubric items graded and the run's evidence recall; then the
    published figures at the run's scales."""
    protocols = list(dict.fromkeys(r["protocol"] for r in rows))
    label = f"; {OFFLINE_LABEL}" if judge == "offline" else ""
    lines = [f"BEAM scores ({judge} judge; {', '.join(protocols)} protocol{label})"]
    head = "".join(f"{p:>11}" for p in protocols)
    for t in table_rows(rows):
        if t["ability"] == ABILITIES[0]:
            lines.append(f"\n  {t['memory']} @ {t['scale']}")
            lines.append(
                f"    {'ability':26}{head}  graded items  evidence recall (probes with it)"
            )
        body = "".join(f"{_pct(v, 10):>11}" for v in t["scores"].values())
        graded = f"{t['graded']}/{t['items']}"
        recall = f"{_pct(t['recall'], 5)} ({t['with_evidence']}/{t['probes']})"
        lines.append(f"    {t['ability']:26}{body}  {graded:>12}  {recall}")
    lines += published_lines(sorted({r["scale"] for r in rows}, key=_scale_order))
    return "\n".join(lines)


def _pct(value: float | None, width: int) -> str:
    return "—".rjust(width) if value is None else f"{100 * value:{width - 1}.1f}%"


def _scale_order(scale: str) -> int:
    from memory_lab.benchmarks.beam.importer import SCALES

    return SCALES.index(scale) if scale in SCALES else len(SCALES)


def published_rows(scales: Sequence[str]) -> list[dict[str, Any]]:
    """The bundled published BEAM figures (``published.json`` in this package) at ``scales``."""
    import json
    from importlib import resources

    text = (resources.files(__package__) / "published.json").read_text("utf-8")
    return [r for r in json.loads(text)["rows"] if r["scale"] in scales]


def published_lines(scales: Sequence[str]) -> list[str]:
    """Published BEAM figures of other systems at ``scales``, labelled as such."""
    lines = [
        "\n  Published BEAM figures of other systems (vendors' own numbers, other answering "
        "models, judges and protocols; not comparable digit for digit):"
    ]
    for scale in scales:
        rows = published_rows([scale])
        if not rows:
            lines.append(f"    {scale}: none published in {PUBLISHED}")
        for r in rows:
            lines.append(f"    {scale}: {r['system']:36} {r['score']:5.1f}%  {r['source']}")
    return lines


def score(request: ScoreRequest) -> ScoreOutcome:
    """``memory-lab score beam RUN``: BEAM's scores of a run, graded offline (value nuggets by
    answer matching) or by a judge model with the prompts of the user's BEAM copy
    (``request.prompts``), under the protocols asked for, into ``beam_scores.csv``."""
    from memory_lab.benchmarks.beam.grading import OfflineBeamGrader
    from memory_lab.benchmarks.beam.judge import PROTOCOLS, load_beam_prompts
    from memory_lab.results.judge_costs import RunJudging

    protocols = request.protocols or PROTOCOLS
    if request.judge == "offline":
        grader, template = OfflineBeamGrader(), ""
    else:
        if request.prompts is None:
            raise BadInput(
                "--prompts DIR: your BEAM copy, whose src/prompts.py holds the judge prompt "
                "(not bundled: BEAM's repository has no licence)"
            )
        prompts = load_beam_prompts(request.prompts)
        judge = RunJudging.of(request.results_dir).judge(request.judge, base_url=request.base_url)
        grader, template = LLMBeamGrader(judge, prompts), prompts.judge
    rows = score_run(request.results_dir, grader, protocols, template)
    out, account = write_scores(request.results_dir, rows, grader)
    text = format_beam_table(rows, request.judge) + f"\n\nper-question scores: {out}"
    return ScoreOutcome(text, [out], account)
