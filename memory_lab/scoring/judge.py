"""The LLM judge: a second, model-graded correctness beside string matching.

The built-in grading prompt is published in the package (``memory_lab/data/judge_prompt.txt``):
it shows the judge the question, the accepted answers and the reply, and asks for one word,
CORRECT or WRONG. ``JUDGE_PROMPT_VERSION`` identifies the prompt text in a run's records.

A user's own grading prompt (``--judge-prompt FILE``) is a UTF-8 text file of at most 64 KiB
(``MAX_PROMPT_BYTES``; no more is ever read, whatever the file) with Python format
placeholders: ``{question}`` and ``{reply}`` (required), ``{answers}`` (the accepted answers, one
per line as ``- answer``, ``(none)`` when there are none) and ``{abstention}`` (``yes`` for a
probe whose answer was never given, else ``no``). Literal braces are written ``{{`` and ``}}``.
The judge's output is read by ``parse_verdict`` (``scoring/verdicts.py``).

The judge is a protocol on the judge core (``scoring/judge_core.py``): a ``JudgeTemplate`` is its
prompt, filled per probe (``fill``) and read back by ``parse_verdict`` (``read``); the core
builds the models (``judge_models``: the call cache, ``RunKeyedCache`` for runs after the
first), makes the calls (a provider that cannot be reached or refuses is a one-line
``ProviderFailure``) and counts their usage. Several prompts and runs make a ``JudgePanel``
(``scoring/judge_panel.py``); prompts in users' files are read by ``scoring/prompt_source.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import PromptTemplate

from memory_lab.errors import BadInput
from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.scoring.judge_core import Judge, JudgeProtocol, judge_models
from memory_lab.scoring.probes import is_abstention
from memory_lab.scoring.prompt_source import format_fields, template_fields
from memory_lab.scoring.verdicts import Verdict, parse_verdict
from memory_lab.text.limits import InputError, ReadBudget, regular_files_only
from memory_lab.text.normalize import find_any

# importable from this module as before its split (callers in results/ and the tests)
from memory_lab.scoring.prompt_source import (  # isort: skip
    MAX_FORMAT_WIDTH as MAX_FORMAT_WIDTH,
    assigned_value as assigned_value,
    describe_expression as describe_expression,
    last_binding as last_binding,
    literal_text as literal_text,
    python_source as python_source,
)
from memory_lab.scoring.verdicts import record_fields as record_fields  # isort: skip

BUILTIN = "builtin"  # names the built-in prompt in --judge-prompt and in run.json
BUILTIN_FILE = "memory_lab/data/judge_prompt.txt"
JUDGE_PROMPT_TEXT = (resources.files("memory_lab") / "data" / "judge_prompt.txt").read_text("utf-8")
JUDGE_PROMPT = PromptTemplate.from_template(JUDGE_PROMPT_TEXT)
JUDGE_PROMPT_VERSION = hashlib.sha256(JUDGE_PROMPT_TEXT.encode("utf-8")).hexdigest()[:12]

PLACEHOLDERS = ("abstention", "question", "answers", "reply")
MAX_PROMPT_BYTES = 64 * 1024  # a grading prompt file (--judge-prompt) is at most 64 KiB
REQUIRED_PLACEHOLDERS = ("question", "reply")
NO_ANSWERS = "(none)"


class JudgePromptError(BadInput):
    """A grading prompt file that cannot be used: one line naming the file."""


@dataclass(frozen=True)
class JudgeTemplate(JudgeProtocol):
    """One grading prompt, the probe judge's protocol: its label in the run (``p1``, ``p2``...),
    where it came from (``builtin`` or a file path) and its text; filled per probe (``fill``)
    and read by ``parse_verdict`` (``read``: CORRECT scores 1, WRONG 0)."""

    name: ClassVar[str] = "probe"

    label: str
    source: str
    text: str

    @property
    def prompts(self) -> Mapping[str, str]:
        return {self.label: self.text}

    def fill(self, question: str, answers: Sequence[str], reply: str, *, abstention: bool) -> str:
        return self.format(question, answers, reply, abstention=abstention)

    def read(self, raw: str) -> tuple[bool | None, float | None]:
        correct = parse_verdict(raw)
        return correct, None if correct is None else float(correct)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def version(self) -> str:
        return self.sha256[:12]

    @property
    def file(self) -> str:
        return BUILTIN_FILE if self.source == BUILTIN else self.source

    @cached_property
    def placeholders(self) -> tuple[str, ...]:
        """The placeholders the text uses, in order of first use."""
        return tuple(dict.fromkeys(name for _, name, _, _ in template_fields(self.text) if name))

    def format(self, question: str, answers: Sequence[str], reply: str, *, abstention: bool) -> str:
        """The grading prompt for one probe, exactly as the judge receives it."""
        return self.text.format(
            abstention="yes" if abstention else "no",
            question=question.strip(),
            answers=format_answers(answers),
            reply=reply.strip(),
        )

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        parts, seen = [], set()
        for literal, name, _, _ in template_fields(self.text):
            parts.append(re.escape(literal))
            if name is None:
                continue
            parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
            seen.add(name)
        return re.compile("".join(parts), re.S)

    def parse(self, prompt: str) -> tuple[str, list[str], str, bool]:
        """(question, answers, reply, abstention) read back from a prompt ``format`` made.

        A prompt without ``{answers}`` reads as no accepted answers; one without
        ``{abstention}`` as an abstention probe exactly when it shows no accepted answers.
        """
        match = self._pattern.fullmatch(prompt)
        if match is None:
            raise ValueError(f"not a prompt of the judge prompt {self.label} ({self.file})")
        found = match.groupdict()
        answers = [
            line.strip().removeprefix("- ").strip()
            for line in found.get("answers", "").splitlines()
            if line.strip() and line.strip() != NO_ANSWERS
        ]
        if "abstention" in found:
            abstention = found["abstention"].strip().lower() == "yes"
        else:
            abstention = not answers
        return (
            found.get("question", "").strip(),
            answers,
            found.get("reply", "").strip(),
            abstention,
        )


BUILTIN_TEMPLATE = JudgeTemplate("p1", BUILTIN, JUDGE_PROMPT_TEXT)


def load_judge_template(source: str, label: str = "p1") -> JudgeTemplate:
    """The grading prompt in file ``source`` (or ``builtin``); JudgePromptError if unusable."""
    if source == BUILTIN:
        return JudgeTemplate(label, BUILTIN, JUDGE_PROMPT_TEXT)
    where = f"--judge-prompt {source}"
    path = Path(source)
    if path.is_dir():
        raise JudgePromptError(f"{where}: is a folder, not a prompt file")
    if not path.exists():
        raise JudgePromptError(f"{where}: no such file")
    try:  # a regular file (no pipe or device), never more than the limit and one byte read
        with regular_files_only():
            data = ReadBudget(MAX_PROMPT_BYTES, "a grading prompt is far shorter").read_file(path)
    except InputError as exc:
        raise JudgePromptError(f"{where}: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JudgePromptError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    fields = format_fields(text, where, JudgePromptError)
    names = [name for _, name, _, _ in fields if name is not None]
    unknown = list(dict.fromkeys(n for n in names if n not in PLACEHOLDERS))
    known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    if unknown:
        shown = ", ".join(f"{{{n}}}" for n in unknown)
        raise JudgePromptError(f"{where}: unknown placeholder(s) {shown} (known: {known})")
    shaped = [name for _, name, spec, conv in fields if name is not None and (spec or conv)]
    if shaped:
        raise JudgePromptError(
            f"{where}: placeholder {{{shaped[0]}}} takes no format spec or conversion"
        )
    missing = [p for p in REQUIRED_PLACEHOLDERS if p not in names]
    if missing:
        shown = ", ".join(f"{{{p}}}" for p in missing)
        raise JudgePromptError(f"{where}: needs the placeholder(s) {shown} (known: {known})")
    return JudgeTemplate(label, source, text)


def judge_templates(sources: Sequence[str]) -> list[JudgeTemplate]:
    """The run's grading prompts labelled ``p1``, ``p2``...; none given: the built-in one."""
    if not sources:
        return [BUILTIN_TEMPLATE]
    return [load_judge_template(s, f"p{i}") for i, s in enumerate(sources, 1)]


def format_answers(answers: Sequence[str]) -> str:
    """Accepted answers one per line as ``- answer``; ``(none)`` when there are none."""
    lines = [" ".join(str(a).split()) for a in answers]
    return "\n".join(f"- {a}" for a in lines if a) or NO_ANSWERS


def judge_prompt(
    question: str,
    answers: Sequence[str],
    reply: str,
    *,
    abstention: bool,
    template: JudgeTemplate = BUILTIN_TEMPLATE,
) -> str:
    """The grading prompt for one probe, exactly as the judge receives it."""
    return template.format(question, answers, reply, abstention=abstention)


def judge_reply(
    model: BaseChatModel | Judge,
    question: str,
    answers: Sequence[str],
    reply: str,
    *,
    abstention: bool,
    template: JudgeTemplate = BUILTIN_TEMPLATE,
) -> Verdict:
    """Ask ``model`` whether ``reply`` answers ``question``; usage from the provider if given."""
    prompt = template.fill(question, answers, reply, abstention=abstention)
    return Verdict.of(Judge.of(model).verdict(template, prompt))


class OfflineJudge(OfflineChatModel):
    """A deterministic judge that grades exactly like string matching (see ``scoring/probes.py``).

    It exists to exercise the judge path offline (tests, ``--judge offline``), not to grade:
    CORRECT iff an accepted answer is in the reply and the reply does not abstain, or, for
    abstention probes, iff the reply abstains. Its verdicts agree with string matching by
    construction. It reads the probe back from the grading prompt it is given (``prompt_text``,
    the built-in one unless told), so it grades what that prompt shows: the same on every run.
    """

    prompt_text: str = JUDGE_PROMPT_TEXT

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-judge"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "offline-judge"}

    def respond(self, prompt: str) -> str:
        return self.grade(prompt)

    def grade(self, prompt: str) -> str:
        """CORRECT or WRONG for a formatted judge prompt."""
        template = JudgeTemplate("offline", "offline", self.prompt_text)
        _question, answers, reply, abstention = template.parse(prompt)
        abstained = is_abstention(reply)
        if abstention:
            correct = abstained
        else:
            correct = not abstained and find_any(reply, answers) is not None
        return "CORRECT" if correct else "WRONG"


def resolve_judge(
    spec: str,
    base_url: str | None = None,
    *,
    temperature: float = 0.0,
    template: JudgeTemplate = BUILTIN_TEMPLATE,
) -> BaseChatModel:
    """``offline`` -> OfflineJudge; ``PROVIDER:MODEL`` -> a real model (ProviderError if not)."""
    (model,) = judge_models(
        spec,
        base_url=base_url,
        temperature=temperature,
        offline=lambda: OfflineJudge(prompt_text=template.text),
    )
    return model
