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

import ast
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from memory_lab.dialogue.importers.beam import (
    ABILITIES,
    ABILITY_KEY,
    RUBRIC_KEY,
    SCALE_KEY,
    VALUE_NUGGET,
)
from memory_lab.errors import BadInput
from memory_lab.log.safe_files import open_new
from memory_lab.models.accounting import Usage
from memory_lab.scoring.judge import (
    assigned_value,
    describe_expression,
    last_binding,
    literal_text,
    python_source,
)
from memory_lab.scoring.judge_core import Judge, JudgeProtocol, json_object
from memory_lab.text.limits import printable
from memory_lab.text.normalize import contains_answer

PROTOCOLS = ("reference", "corrected")
SCORES_FILE = "beam_scores.csv"
SCORER = "beam-scores"  # names the judge's account in the results folder (results.judge_costs)
JUDGE_PROMPT_NAME = "unified_llm_judge_base_prompt"
PROMPTS_FILE = Path("src") / "prompts.py"
METRICS_FILE = Path("src") / "evaluation" / "compute_metrics.py"
_PROMPT_READ_LIMIT = 8 * 1024 * 1024  # prompts.py is about 0.6 MB
_PLACEHOLDER = re.compile(r"<question>|<rubric_item>|<llm_response>")
_SNIPPETS = {"first_paragraph": "{first}", "second_paragraph": "{second}"}  # llm_equivalence's
_MAX_VALUE_WORDS = 6
_SCORE = re.compile(r"""["']?score["']?\s*:\s*["']?(-?[0-9]+(?:\.[0-9]+)?)""")


class BeamPromptError(BadInput):
    """BEAM's prompt texts cannot be read from the copy given: one line naming the file (and
    the line and name at fault)."""


@dataclass(frozen=True)
class BeamPrompts:
    """BEAM's judge prompt, and the system message and user template of its equivalence check
    (``{first}`` and ``{second}`` in the template stand for the two snippets)."""

    judge: str
    equivalence_system: str
    equivalence_user: str
    source: str

    @property
    def rubric(self) -> BeamRubric:
        return BeamRubric(self.judge)

    @property
    def equivalence(self) -> BeamEquivalence:
        return BeamEquivalence(self.equivalence_system, self.equivalence_user)

    def equivalence_messages(self, first: str, second: str) -> list[dict[str, str]]:
        return self.equivalence.fill(first, second)


@dataclass(frozen=True)
class BeamRubric(JudgeProtocol):
    """BEAM's rubric judge as a protocol of the judge core: ``unified_llm_judge_base_prompt``
    filled for one rubric item (``judge_prompt``), its reply read by ``parse_judge_output``;
    the score is the JSON's ``score`` as the judge gave it (the BEAM protocols' reading of it is
    ``item_score``'s)."""

    name: ClassVar[str] = "beam-rubric"

    template: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {JUDGE_PROMPT_NAME: self.template}

    def fill(self, question: str, item: str, reply: str, protocol: str) -> str:
        return judge_prompt(self.template, question, item, reply, protocol)

    def read(self, raw: str) -> tuple[Any, float | None]:
        parsed = parse_judge_output(raw)
        return parsed, item_score(parsed, "corrected", "")


@dataclass(frozen=True)
class BeamEquivalence(JudgeProtocol):
    """BEAM's ``llm_equivalence`` check as a protocol: its system message and user template
    (``{first}`` and ``{second}`` stand for the two snippets); a reply with ``yes`` in it
    (any case) reads as equivalent (score 1)."""

    name: ClassVar[str] = "beam-equivalence"

    system: str
    user: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {"llm_equivalence.system_msg": self.system, "llm_equivalence.user_msg": self.user}

    def fill(self, first: str, second: str) -> list[dict[str, str]]:
        values = {"{first}": first, "{second}": second}
        user = re.sub(r"\{first\}|\{second\}", lambda m: values[m.group()], self.user)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def read(self, raw: str) -> tuple[bool, float]:
        same = "yes" in raw.lower()
        return same, float(same)


def find_beam_copy(start: Path) -> Path | None:
    """The BEAM repository folder holding ``src/prompts.py`` at ``start`` or above it."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / PROMPTS_FILE).is_file():
            return folder
    return None


def _source(path: Path) -> ast.Module:
    return python_source(
        path, _PROMPT_READ_LIMIT, "BEAM's prompts.py is about 0.6 MB", BeamPromptError
    )


def _judge_text(path: Path) -> str:
    """``unified_llm_judge_base_prompt`` as Python keeps it (its last assignment): plain text."""
    value = assigned_value(_source(path).body, JUDGE_PROMPT_NAME, path, BeamPromptError)
    if value is None:
        raise BeamPromptError(f"{path}: no {JUDGE_PROMPT_NAME} string in it")
    return literal_text(value, f"{path}: line {value.lineno}: {JUDGE_PROMPT_NAME}", BeamPromptError)


def _equivalence_texts(path: Path) -> tuple[str, str]:
    """The system message and the user template of ``llm_equivalence`` (its last definition):
    the ``content`` of the dicts last assigned to ``system_msg`` and ``user_msg`` in it."""
    found = last_binding(_source(path).body, "llm_equivalence")
    if found is None or not isinstance(found[0], ast.FunctionDef):
        where = f"{path}: line {found[0].lineno}: " if found else f"{path}: "
        raise BeamPromptError(f"{where}llm_equivalence: no such function in it")
    fn = found[0]
    texts = []
    for name in ("system_msg", "user_msg"):
        value = assigned_value(fn.body, name, path, BeamPromptError)
        if value is None:
            raise BeamPromptError(f"{path}: line {fn.lineno}: llm_equivalence: no {name} in it")
        content = _content(path, name, value)
        texts.append(_template(content, f"{path}: line {content.lineno}: {name}['content']"))
    return texts[0], texts[1]


def _content(path: Path, name: str, node: ast.expr) -> ast.expr:
    """The value of the last ``"content"`` key of the dict literal ``node``."""
    where = f"{path}: line {node.lineno}: {name}"
    if not isinstance(node, ast.Dict):
        raise BeamPromptError(f"{where}: {describe_expression(node)}, not a dict literal")
    content = None
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise BeamPromptError(f"{where}: a key that is not a string literal")
        if key.value == "content":
            content = value
    if content is None:
        raise BeamPromptError(f"{where}: no 'content' in it")
    return content


def _template(node: ast.expr, where: str) -> str:
    """A string literal, or an f-string whose placeholders are the two snippets
    (``{first_paragraph}``, ``{second_paragraph}``, as they are), written ``{first}`` and
    ``{second}``; BeamPromptError naming ``where`` for anything else."""
    if not isinstance(node, ast.JoinedStr):
        return literal_text(node, where, BeamPromptError)
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(str(part.value))
            continue
        if not isinstance(part, ast.FormattedValue):  # pragma: no cover - JoinedStr holds no other
            raise BeamPromptError(f"{where}: {describe_expression(node)}, not a template")
        name = part.value.id if isinstance(part.value, ast.Name) else ""
        if name not in _SNIPPETS or part.conversion != -1 or part.format_spec is not None:
            raise BeamPromptError(
                f"{where}: f-string placeholder {{{_shown(part)}}}: only {{first_paragraph}} "
                "and {second_paragraph}, as they are, can be filled in"
            )
        parts.append(_SNIPPETS[name])
    return "".join(parts)


def _shown(part: ast.FormattedValue) -> str:
    try:
        text = ast.unparse(part.value)
    except RecursionError:
        text = "..."
    conversion = f"!{chr(part.conversion)}" if part.conversion != -1 else ""
    spec = ":..." if part.format_spec is not None else ""
    return printable(text[:60] + conversion + spec)


def load_beam_prompts(folder: Path) -> BeamPrompts:
    """BEAM's prompts from the copy at ``folder`` (the repository, or a folder inside it such as
    ``chats/``); BeamPromptError (one line) when there is none."""
    root = find_beam_copy(Path(folder))
    if root is None:
        raise BeamPromptError(
            f"{folder}: no BEAM copy with {PROMPTS_FILE} here or above (BEAM's judge prompt is "
            "not bundled: its repository has no licence; name your copy with --beam-copy)"
        )
    metrics = root / METRICS_FILE
    if not metrics.is_file():
        raise BeamPromptError(f"{metrics}: missing (BEAM's equivalence prompt is read from it)")
    system, user = _equivalence_texts(metrics)
    return BeamPrompts(_judge_text(root / PROMPTS_FILE), system, user, str(root))


def judge_prompt(template: str, question: str, item: str, reply: str, protocol: str) -> str:
    """The judge prompt of one rubric item. ``reference``: ``<rubric_item>`` then
    ``<llm_response>`` replaced as the reference does (``<question>`` left in); ``corrected``: all
    three replaced in one pass (a value holding a placeholder is not replaced again)."""
    if protocol == "reference":
        return template.replace("<rubric_item>", item).replace("<llm_response>", reply)
    values = {"<question>": question, "<rubric_item>": item, "<llm_response>": reply}
    return _PLACEHOLDER.sub(lambda m: values[m.group()], template)


def parse_judge_output(text: str) -> Any:
    """The judge's JSON as the reference's ``parse_json_response`` reads it (a fenced block, the
    whole text, or the first ``{...}``/``[...]``). Where the reference falls back to
    ``json_repair``, the first JSON object with a ``score`` is read as the object says
    (``judge_core.json_object``: whole, or cut short or malformed, field by field; never a score
    mentioned in prose before it, inside a string or in a nested object); a text with no object
    at all, a ``"score": N`` in it; None when nothing can be read."""
    response = text.strip()
    if response.startswith("```"):
        m = re.search(r"```(?:json)?\s*(\[.*\]|\{.*\})\s*```", response, re.DOTALL)
        if m:
            response = m.group(1).strip()
    try:
        return json.loads(response)
    except json.JSONDecodeError:
        pass
    m = re.search(r"(\{.*?\}|\[.*?\])", response, re.DOTALL)
    if m:
        try:
            return json.loads(m.group(1))
        except json.JSONDecodeError:
            pass
    if "{" in text:
        return json_object(text, "score")
    m = _SCORE.search(text)
    return {"score": float(m.group(1))} if m else None


def item_score(parsed: Any, protocol: str, ability: str) -> float | None:
    """A rubric item's score from the parsed judge output: ``int`` as the reference reads it
    (0.5 -> 0), except event ordering's ``float``; ``corrected`` keeps it as it is. None (no
    score: unreadable) for one that is not a number from 0 to 1, BEAM's scale, in either
    protocol."""
    if not isinstance(parsed, dict) or "score" not in parsed:
        return None
    try:
        value = float(parsed["score"])
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(value) and 0 <= value <= 1):  # outside BEAM's scale: unreadable,
        return None  # counted apart and never averaged (a judge's 7 or 1e308 is no score)
    if protocol == "reference" and ability != "event_ordering":
        return float(int(value))
    return value


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b of two rankings with ties (``scipy.stats.kendalltau``'s ``variant="b"``):
    (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y)); NaN when either
    ranking is constant, clipped to [-1, 1]."""
    n = len(x)
    total = n * (n - 1) // 2
    con = dis = x_ties = y_ties = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            x_ties += dx == 0
            y_ties += dy == 0
            if dx * dy > 0:
                con += 1
            elif dx * dy < 0:
                dis += 1
    if x_ties == total or y_ties == total:
        return math.nan
    tau = (con - dis) / math.sqrt(total - x_ties) / math.sqrt(total - y_ties)
    return min(1.0, max(-1.0, tau))


def align(
    reference: list[str], system: list[str], equivalent: Callable[[str, str], bool]
) -> list[str]:
    """The reply's items with each replaced by the first unused reference item the judge finds
    equivalent (``equivalent(reference_item, reply_item)``), as the reference's
    ``align_with_llm``."""
    used: set[int] = set()
    out = []
    for s in system:
        matched = None
        for index, r in enumerate(reference):
            if index not in used and equivalent(r, s):
                matched = index
                break
        if matched is None:
            out.append(s)
        else:
            out.append(reference[matched])
            used.add(matched)
    return out


def event_ordering_score(
    reference: list[str], system: list[str], equivalent: Callable[[str, str], bool]
) -> dict[str, float]:
    """Precision, recall, F1, normalised τ-b and their product, as ``event_ordering_score``."""
    canon = align(reference, system, equivalent)
    tp = len(set(reference) & set(canon))
    fp = len([x for x in canon if x not in reference])
    fn = len([x for x in reference if x not in canon])
    precision = tp / (tp + fp) if tp + fp else 0
    recall = tp / (tp + fn) if tp + fn else 0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0
    union = list(dict.fromkeys(reference + canon))
    tie_rank = len(union) + 1

    def ranks(seq: list[str]) -> list[int]:
        r = {item: i + 1 for i, item in enumerate(seq)}
        return [r.get(u, tie_rank) for u in union]

    tau_norm = (kendall_tau_b(ranks(reference), ranks(canon)) + 1) / 2
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tau_norm": tau_norm,
        "final_score": tau_norm * f1,
    }


@dataclass(frozen=True)
class ItemGrade:
    """One rubric item: its score (None: ungraded or unreadable), how, and the judge's output."""

    item: str
    score: float | None
    how: str  # "judge", "match" (offline answer matching), "ungraded" or "unreadable"
    raw: str = ""


@dataclass(frozen=True)
class QuestionScore:
    """A question's BEAM scores under one protocol. ``score`` is what BEAM's report averages:
    ``tau_norm`` for event ordering, ``judge_score`` otherwise; None when nothing was graded."""

    ability: str
    protocol: str
    judge_score: float | None
    tau_norm: float | None
    grades: tuple[ItemGrade, ...]

    @property
    def score(self) -> float | None:
        return self.tau_norm if self.ability == "event_ordering" else self.judge_score

    @property
    def graded(self) -> int:
        return sum(g.score is not None for g in self.grades)


class LLMBeamGrader:
    """A judge (a ``judge_core.Judge``, or a LangChain chat model made one) with BEAM's two
    protocols: one call per rubric item, one per (reply line, reference item) pair of the
    equivalence alignment; ``usage`` is what its calls used so far."""

    def __init__(self, model: Any, prompts: BeamPrompts):
        self.judge = Judge.of(model)
        self.prompts = prompts
        self.rubric = prompts.rubric
        self.equivalence = prompts.equivalence
        self.aligns = True

    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def protocols(self) -> tuple[JudgeProtocol, ...]:
        return (self.rubric, self.equivalence)

    def usage(self) -> Usage:
        return self.judge.usage()

    def grade(self, prompt: str, item: str, reply: str, ability: str) -> tuple[Any, str, str]:
        verdict = self.judge.verdict(self.rubric, prompt)
        parsed = verdict.parsed
        return parsed, ("judge" if parsed is not None else "unreadable"), verdict.raw

    def equivalent(self, first: str, second: str) -> bool:
        prompt = self.equivalence.fill(first, second)
        return bool(self.judge.verdict(self.equivalence, prompt).parsed)


def value_of(item: str, ability: str) -> str | None:
    """The value of a rubric item that states a short value (``should state: March 29``)."""
    m = VALUE_NUGGET.match(item)
    if not m or ability in ("abstention", "contradiction_resolution"):
        return None
    value = m.group(1).strip().strip("'\"").rstrip(".")
    return value if value and len(value.split()) <= _MAX_VALUE_WORDS else None


class OfflineBeamGrader:
    """No judge model: value nuggets graded by answer matching (1 or 0), the rest ungraded;
    no equivalence alignment, so event ordering's τ-b is ungraded."""

    aligns = False
    name = "offline"
    protocols: tuple[JudgeProtocol, ...] = ()

    def usage(self) -> Usage:
        return Usage()  # no model is called

    def grade(self, prompt: str, item: str, reply: str, ability: str) -> tuple[Any, str, str]:
        value = value_of(item, ability)
        if value is None:
            return None, "ungraded", ""
        return {"score": 1.0 if contains_answer(reply, value) else 0.0}, "match", ""

    def equivalent(self, first: str, second: str) -> bool:  # pragma: no cover - never aligned
        raise NotImplementedError


def score_question(
    ability: str,
    question: str,
    rubric: list[str],
    reply: str,
    grader: Any,
    protocol: str,
    template: str = "",
) -> QuestionScore:
    """One question's BEAM scores: every rubric item judged, their mean over graded items (all
    of them with a judge model), and for event ordering the normalised τ-b of the reply's lines."""
    if protocol not in PROTOCOLS:
        raise BadInput(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    grades = []
    for item in rubric:
        prompt = judge_prompt(template, question, item, reply, protocol) if template else ""
        parsed, how, raw = grader.grade(prompt, item, reply, ability)
        score = item_score(parsed, protocol, ability) if parsed is not None else None
        if parsed is not None and score is None:
            how = "unreadable"
        grades.append(ItemGrade(item, score, how, raw))
    scores = [g.score for g in grades if g.score is not None]
    tau = None
    if ability == "event_ordering" and grader.aligns:
        tau = event_ordering_score(rubric, reply.split("\n"), grader.equivalent)["tau_norm"]
    judge = sum(scores) / len(scores) if scores else None
    return QuestionScore(ability, protocol, judge, tau, tuple(grades))


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
    from memory_lab.dialogue.importers.beam import SCALES

    return SCALES.index(scale) if scale in SCALES else len(SCALES)


def published_rows(scales: Sequence[str]) -> list[dict[str, Any]]:
    """The bundled published BEAM figures (``memory_lab.results.published.published_beam``) at
    ``scales``."""
    from memory_lab.results.published import published_beam

    return [r for r in published_beam()["rows"] if r["scale"] in scales]


def published_lines(scales: Sequence[str]) -> list[str]:
    """Published BEAM figures of other systems at ``scales``, labelled as such."""
    lines = [
        "\n  Published BEAM figures of other systems (vendors' own numbers, other answering "
        "models, judges and protocols; not comparable digit for digit):"
    ]
    for scale in scales:
        rows = published_rows([scale])
        if not rows:
            lines.append(f"    {scale}: none published in memory_lab/data/published_beam.json")
        for r in rows:
            lines.append(f"    {scale}: {r['system']:36} {r['score']:5.1f}%  {r['source']}")
    return lines
