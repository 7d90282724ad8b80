"""LoCoMo-Plus's Cognitive judge: its prompt, its 1 / 0.5 / 0 scale and its aggregation, as the
reference's ``evaluation_framework/task_eval/llm_as_judge.py`` does them.

The prompt is not bundled: Locomo-Plus ships without a licence, so it is read from the user's
checkout (``evaluation_framework/task_eval/prompt.py``, parsed, never run; the last assignment
of each name, as Python keeps it, a plain string literal with format widths of at most
``MAX_FORMAT_WIDTH``, else one line naming the file, line and name): the ``Cognitive``
entry of ``PROMPT_TEMPLATES`` filled with the reply (``{pred}``) and the cue (``{evidence}``, the
probe metadata's ``judge_evidence``; no ``{gold}``: there is no reference answer), then
prefixed with ``CONV_START_PROMPT`` for speakers A and B, as the reference's ``call_llm`` sends
it. The judge's output is read by ``parse_judge_response`` (a ``label``/``reason`` JSON object,
else JSON, else the first of the words correct / wrong / partial found, in that order, so
"incorrect" reads as correct, as in the reference); ``correct`` scores 1, ``partial`` 0.5 and
anything else 0. ``summarize`` aggregates as the reference's ``_compute_summary``: total, mean
and per-category means, rounded as it rounds (2 and 4 decimals).

The judge is a protocol on the judge core (``scoring/judge_core.py``): ``CognitivePrompt`` is its
prompt, filled per reply (``fill``) and read by ``parse_judge_response`` (``read``). Its model
goes through the run's call cache (``results.judge_costs.RunJudging``), so judging the same run
again sends no request; the verdicts file names the judge model and the prompt's SHA-256 and
records the judge's calls, tokens and estimated cost, and the same account is written into the
results folder (``judge-cognitive.judge.json``). ``score`` is ``memory-lab score locomo-plus``.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel

from memory_lab.benchmarks.declaration import ScoreOutcome, ScoreRequest
from memory_lab.benchmarks.locomo_plus.importer import JUDGE_EVIDENCE_KEY
from memory_lab.errors import BadInput
from memory_lab.scoring.judge import (
    assigned_value,
    describe_expression,
    format_fields,
    literal_text,
    python_source,
)
from memory_lab.scoring.judge_core import Judge, JudgeProtocol, judge_models
from memory_lab.text.limits import printable

PROMPT_FILE = "evaluation_framework/task_eval/prompt.py"  # in a Locomo-Plus checkout
MAX_PROMPT_FILE_BYTES = 256 * 1024
CATEGORY = "Cognitive"  # the reference's name for the category
SCORER = "judge-cognitive"  # names the judge's account in the results folder (results.judge_costs)
LABEL_TO_SCORE = {"correct": 1.0, "partial": 0.5, "wrong": 0.0}
_KNOWN = "{pred}, {evidence} and {gold}"  # the template's placeholders, as the reference fills
JUDGE_MAX_TOKENS = 512  # the reference judge's --max-tokens default (temperature 0)
_JSON_LABEL = re.compile(
    r'\{[^{}]*"label"\s*:\s*["\']([^"\']+)["\'][^{}]*"reason"\s*:\s*["\']([^"\']*)["\']', re.DOTALL
)


class CognitiveJudgeError(BadInput):
    """The Cognitive judge's prompt cannot be read: one line naming the file and the field."""


@dataclass(frozen=True)
class CognitivePrompt(JudgeProtocol):
    """The Cognitive grading prompt read from ``source``: its template and the conversation
    prefix the reference puts before every judge call. As the judge's protocol: filled per
    reply (``fill``), read by ``parse_judge_response`` (``read``: its label and reason, scored
    1 / 0.5 / 0); an empty reply reads as ``(empty)``, as the reference's client returns it."""

    name: ClassVar[str] = "cognitive"
    empty_reply: ClassVar[str] = "(empty)"

    source: str
    template: str
    conv_start: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {
            f"PROMPT_TEMPLATES[{CATEGORY!r}]": self.template,
            "CONV_START_PROMPT": self.conv_start,
        }

    def format(self, evidence: str, reply: str) -> str:
        """The judge's prompt for one reply, exactly as the reference sends it."""
        text = self.template.format(gold="", pred=reply or "", evidence=evidence or "")
        prefix = self.conv_start.format("A", "B")
        return prefix + text.strip() if text.strip() else prefix.strip()

    def fill(self, evidence: str, reply: str) -> str:
        return self.format(evidence, reply)

    def read(self, raw: str) -> tuple[tuple[str, str], float]:
        label, reason = parse_judge_response(raw)
        return (label, reason), label_score(label)


def _value(tree: ast.Module, name: str, where: str) -> ast.expr:
    """The expression last assigned to ``name`` (the value Python keeps)."""
    value = assigned_value(tree.body, name, where, CognitiveJudgeError)
    if value is None:
        raise CognitiveJudgeError(f"{where}: {name}: not assigned")
    return value


def _cognitive_template(tree: ast.Module, where: str) -> tuple[str, str]:
    """``PROMPT_TEMPLATES['Cognitive']`` (the dict literal's last such key), and where it is."""
    node = _value(tree, "PROMPT_TEMPLATES", where)
    field = f"PROMPT_TEMPLATES[{CATEGORY!r}]"
    if not isinstance(node, ast.Dict):
        raise CognitiveJudgeError(
            f"{where}: line {node.lineno}: PROMPT_TEMPLATES: {describe_expression(node)}, "
            "not a dict literal"
        )
    found = None
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            line = (key or value).lineno
            raise CognitiveJudgeError(
                f"{where}: line {line}: PROMPT_TEMPLATES: a key that is not a string literal"
            )
        if key.value == CATEGORY:
            found = value
    if found is None:
        raise CognitiveJudgeError(f"{where}: line {node.lineno}: {field}: missing or not text")
    at = f"{where}: line {found.lineno}: {field}"
    return literal_text(found, at, CognitiveJudgeError), at


def load_cognitive_prompt(path: str | Path) -> CognitivePrompt:
    """The Cognitive prompt of a Locomo-Plus checkout (or of its ``prompt.py``), read within
    256 KiB and parsed without running it: the values Python would keep (the last assignments),
    plain string literals with bounded format widths; CognitiveJudgeError naming the file, line
    and field."""
    path = Path(path)
    file = path / PROMPT_FILE if path.is_dir() else path
    where = str(file)
    if not file.is_file():
        raise CognitiveJudgeError(f"{where}: no such file (give the Locomo-Plus checkout)")
    tree = python_source(file, MAX_PROMPT_FILE_BYTES, "prompt.py is a few KiB", CognitiveJudgeError)
    template, template_at = _cognitive_template(tree, where)
    conv_node = _value(tree, "CONV_START_PROMPT", where)
    conv_at = f"{where}: line {conv_node.lineno}: CONV_START_PROMPT"
    conv_start = literal_text(conv_node, conv_at, CognitiveJudgeError)
    format_fields(template, template_at, CognitiveJudgeError)
    format_fields(conv_start, conv_at, CognitiveJudgeError)
    trials = (
        (conv_at, lambda: conv_start.format("A", "B"), "two {}"),
        (template_at, lambda: template.format(gold="", pred="r", evidence="e"), _KNOWN),
    )
    for at, trial, known in trials:
        try:
            trial()
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            raise CognitiveJudgeError(
                f"{at}: unusable placeholder {printable(exc)} (it takes {known})"
            ) from None
    return CognitivePrompt(where, template, conv_start)


def parse_judge_response(raw: str) -> tuple[str, str]:
    """(label, reason) from the judge's output, as the reference's ``_parse_judge_response``."""
    label, reason = "", ""
    raw = (raw or "").strip()
    try:
        m = _JSON_LABEL.search(raw)
        if m:
            label, reason = m.group(1).strip(), (m.group(2) or "").strip()
        else:
            obj = json.loads(raw)
            label = (obj.get("label") or "").strip()
            reason = (obj.get("reason") or "").strip()
    except Exception:  # noqa: BLE001 - the reference falls back on any failure
        lowered = raw.lower()
        label = next((w for w in ("correct", "wrong", "partial") if w in lowered), label)
        reason = raw[:200] if raw else ""
    return label, reason


def label_score(label: str) -> float:
    """correct 1, partial 0.5, anything else 0."""
    return LABEL_TO_SCORE.get((label or "").strip().lower(), 0.0)


@dataclass(frozen=True)
class CognitiveVerdict:
    label: str
    reason: str
    score: float
    raw: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_hit: bool = False


def judge_cognitive(
    model: BaseChatModel | Judge, prompt: CognitivePrompt, evidence: str, reply: str
) -> CognitiveVerdict:
    """Ask ``model`` whether ``reply`` is linked to the cue ``evidence``; an empty answer reads
    as ``(empty)``, as the reference's client returns it."""
    v = Judge.of(model).verdict(prompt, prompt.fill(evidence, reply))
    (label, reason), score = v.parsed, v.score
    return CognitiveVerdict(
        label, reason, score, v.raw, v.input_tokens, v.output_tokens, v.cache_hit
    )


def summarize(scored: Iterable[tuple[str, float]]) -> dict[str, Any]:
    """(category, score) pairs aggregated as the reference's ``_compute_summary``."""
    total, count = 0.0, 0
    by_cat: dict[str, dict[str, float]] = defaultdict(lambda: {"score": 0.0, "count": 0})
    for category, score in scored:
        s = float(score)
        total += s
        count += 1
        by_cat[category or "default"]["score"] += s
        by_cat[category or "default"]["count"] += 1
    return {
        "total_score": round(total, 2),
        "total_samples": count,
        "max_possible": count,
        "overall_avg": round(total / count, 4) if count else 0.0,
        "by_category": {
            cat: {
                "score": round(v["score"], 2),
                "count": int(v["count"]),
                "avg": round(v["score"] / v["count"], 4) if v["count"] else 0.0,
            }
            for cat, v in sorted(by_cat.items())
        },
    }


def judge_records(
    records: Iterable[dict[str, Any]], model: BaseChatModel | Judge, prompt: CognitivePrompt
) -> list[dict[str, Any]]:
    """The Cognitive verdict of every cognitive probe record of a run (``read_records``), in
    record order: its ids, the reply and the judge's label, reason, score and output, with the
    call's tokens and whether the call cache answered it."""
    judge = Judge.of(model)
    out = []
    for r in records:
        if r.get("type") != "probe" or r.get("category") != "cognitive":
            continue
        evidence = (r.get("probe_metadata") or {}).get(JUDGE_EVIDENCE_KEY)
        if not isinstance(evidence, str):
            raise CognitiveJudgeError(
                f"{r.get('dialogue')} {r.get('probe_id')}: probe_metadata.{JUDGE_EVIDENCE_KEY}: "
                "missing (import it with locomo-plus:)"
            )
        v = judge_cognitive(judge, prompt, evidence, r.get("reply", ""))
        out.append(
            {
                "dialogue": r.get("dialogue"),
                "memory": r.get("memory"),
                "probe_id": r.get("probe_id"),
                "category": CATEGORY,
                "prediction": r.get("reply", ""),
                "judge_label": v.label,
                "judge_reason": v.reason,
                "judge_score": v.score,
                "judge_raw": v.raw,
                "judge_input_tokens": v.input_tokens,
                "judge_output_tokens": v.output_tokens,
                "judge_cache_hit": v.cache_hit,
            }
        )
    return out


def require_model(spec: str) -> None:
    """CognitiveJudgeError unless ``spec`` names a model: there is no offline Cognitive judge
    (grading a reply's link to a cue takes a model)."""
    if ":" not in spec:
        raise CognitiveJudgeError(f"--judge {spec}: the Cognitive judge needs PROVIDER:MODEL")


def cognitive_judge_model(
    spec: str, base_url: str | None = None, cache: Any = None
) -> BaseChatModel:
    """The judge model ``PROVIDER:MODEL`` as the reference calls it: temperature 0, at most 512
    tokens out (through ``cache`` when given; ``RunJudging.judge`` gives the run's)."""
    require_model(spec)
    (model,) = judge_models(spec, base_url=base_url, max_tokens=JUDGE_MAX_TOKENS, cache=cache)
    return model


def judge_results(
    results: str | Path, model: BaseChatModel | Judge, prompt: CognitivePrompt, out: str | Path
) -> dict[str, dict[str, Any]]:
    """Judge the cognitive probes of a results folder; write ``out`` (JSON: the judge's account
    (``judge``: its model, the prompt's SHA-256, calls, tokens, estimated cost), every verdict,
    and the reference's summary per memory), write the account into the results folder too
    (``judge_costs.write_account``), and return the summaries."""
    from memory_lab.results.judge_costs import write_account
    from memory_lab.results.read import read_records

    judge = Judge.of(model)
    judged = judge_records(read_records(results), judge, prompt)
    if not judged:
        raise CognitiveJudgeError(f"{results}: no cognitive probes (import with locomo-plus:)")
    memories = list(dict.fromkeys(str(j["memory"]) for j in judged))
    summaries = {
        m: summarize((j["category"], j["judge_score"]) for j in judged if j["memory"] == m)
        for m in memories
    }
    write_account(results, SCORER, judge, [prompt])
    document = {
        "prompt": prompt.source,
        "judge": judge.account([prompt]).to_dict(),
        "summaries": summaries,
        "judged": judged,
    }
    Path(out).write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
    return summaries


VERDICTS_FILE = "locomo_plus_verdicts.json"  # in the run's folder when no --out is named


def score(request: ScoreRequest) -> ScoreOutcome:
    """``memory-lab score locomo-plus RUN``: every cognitive probe's reply graded by the judge
    model with the Cognitive prompt of the user's Locomo-Plus checkout (``request.prompts``),
    each verdict into ``request.out`` (default: ``locomo_plus_verdicts.json`` in the run)."""
    from memory_lab.results.judge_costs import RunJudging

    if request.prompts is None:
        raise CognitiveJudgeError(
            "--prompts CHECKOUT: the Locomo-Plus checkout (or its prompt.py) whose Cognitive "
            "prompt is used (not bundled: its repository has no licence)"
        )
    prompt = load_cognitive_prompt(request.prompts)
    require_model(request.judge)
    judge = RunJudging.of(request.results_dir).judge(
        request.judge, base_url=request.base_url, max_tokens=JUDGE_MAX_TOKENS
    )
    out = request.out or request.results_dir / VERDICTS_FILE
    summaries = judge_results(request.results_dir, judge, prompt, out)
    lines = [
        f"{memory}: Cognitive score {s['overall_avg']} over {s['total_samples']} probe(s) "
        f"(total {s['total_score']}; correct 1, partial 0.5, wrong 0)"
        for memory, s in summaries.items()
    ]
    lines.append(f"wrote every verdict to {out}")
    return ScoreOutcome("\n".join(lines), [Path(out)], judge.account([prompt]))
