"""BEAM's judge: its prompts, read from the user's BEAM copy (never bundled: the repository has no
licence), parsed without running them; the rubric and equivalence protocols on the judge core;
the judge's JSON read as the reference reads it (see ``scores.py`` for the whole protocol)."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from memory_lab.errors import BadInput
from memory_lab.scoring.judge import (
    assigned_value,
    describe_expression,
    last_binding,
    literal_text,
    python_source,
)
from memory_lab.scoring.judge_core import JudgeProtocol, json_object
from memory_lab.text.limits import printable

PROTOCOLS = ("reference", "corrected")
JUDGE_PROMPT_NAME = "unified_llm_judge_base_prompt"
PROMPTS_FILE = Path("src") / "prompts.py"
METRICS_FILE = Path("src") / "evaluation" / "compute_metrics.py"
_PROMPT_READ_LIMIT = 8 * 1024 * 1024  # prompts.py is about 0.6 MB
_PLACEHOLDER = re.compile(r"<question>|<rubric_item>|<llm_response>")
_SNIPPETS = {"first_paragraph": "{first}", "second_paragraph": "{second}"}  # llm_equivalence's
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
