"""The LLM judge: a second, model-graded correctness beside string matching.

The built-in grading prompt is published in the package (``memory_lab/data/judge_prompt.txt``):
it shows the judge the question, the accepted answers and the reply, and asks for one word,
CORRECT or WRONG. ``JUDGE_PROMPT_VERSION`` identifies the prompt text in a run's records.

A user's own grading prompt (``--judge-prompt FILE``) is a UTF-8 text file of at most 64 KiB
(``MAX_PROMPT_BYTES``; no more is ever read, whatever the file) with Python format
placeholders: ``{question}`` and ``{reply}`` (required), ``{answers}`` (the accepted answers, one
per line as ``- answer``, ``(none)`` when there are none) and ``{abstention}`` (``yes`` for a
probe whose answer was never given, else ``no``). Literal braces are written ``{{`` and ``}}``.
The judge's output is read by ``parse_verdict``.

Several prompts and several runs (``--judge-runs N``) make a ``JudgePanel``: one model per
(prompt, run). Run 0 of a prompt is cached exactly as a single judge call always was; run ``i``
> 0 goes through ``RunKeyedCache`` (a key of its own), so repeated runs are distinct calls that
a rerun of the whole benchmark still finds in the cache.

The readers of prompts from users' files live here too, for every judge (``results/`` reads
BEAM's and LoCoMo-Plus's with them): ``python_source`` (a ``prompts.py`` parsed, never run,
bounded in bytes, tokens and depth), ``assigned_value`` (the value Python keeps: the last
binding), ``literal_text`` (plain string literals only) and ``format_fields`` (bounded format
widths).

The judge is a protocol on the judge core (``scoring/judge_core.py``): a ``JudgeTemplate`` is its
prompt, filled per probe (``fill``) and read back by ``parse_verdict`` (``read``); the core
builds the models (``judge_models``: the call cache, ``RunKeyedCache`` for runs after the
first), makes the calls (a provider that cannot be reached or refuses is a one-line
``ProviderFailure``) and counts their usage.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import string
import tokenize
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import PromptTemplate

from memory_lab.errors import BadInput
from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.scoring.judge_core import Judge, JudgeProtocol, JudgeVerdict, judge_models
from memory_lab.scoring.probes import is_abstention
from memory_lab.scoring.stats import majority_vote
from memory_lab.text.limits import InputError, ReadBudget, decode, printable, regular_files_only
from memory_lab.text.normalize import find_any

BUILTIN = "builtin"  # names the built-in prompt in --judge-prompt and in run.json
BUILTIN_FILE = "memory_lab/data/judge_prompt.txt"
JUDGE_PROMPT_TEXT = (resources.files("memory_lab") / "data" / "judge_prompt.txt").read_text("utf-8")
JUDGE_PROMPT = PromptTemplate.from_template(JUDGE_PROMPT_TEXT)
JUDGE_PROMPT_VERSION = hashlib.sha256(JUDGE_PROMPT_TEXT.encode("utf-8")).hexdigest()[:12]

PLACEHOLDERS = ("abstention", "question", "answers", "reply")
MAX_PROMPT_BYTES = 64 * 1024  # a grading prompt file (--judge-prompt) is at most 64 KiB
REQUIRED_PLACEHOLDERS = ("question", "reply")
NO_ANSWERS = "(none)"
_WORD = re.compile(r"[A-Za-z]+")
_LABEL = re.compile(r"""["']?label["']?\s*[:=]\s*["']?([A-Za-z]+)""", re.I)


class JudgePromptError(BadInput):
    """A grading prompt file that cannot be used: one line naming the file."""


@dataclass(frozen=True)
class Verdict:
    """One judge call: the verdict (None when unparseable), the raw output, its usage, and
    whether the call was served from the on-disk cache."""

    correct: bool | None
    raw: str
    input_tokens: int
    output_tokens: int
    cache_hit: bool = False

    @classmethod
    def of(cls, verdict: JudgeVerdict) -> Verdict:
        """The probe judge's reading of a core verdict (``parsed``: the CORRECT/WRONG call)."""
        v = verdict
        return cls(v.parsed, v.raw, v.input_tokens, v.output_tokens, v.cache_hit)


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
        return tuple(dict.fromkeys(name for _, name, _, _ in _fields(self.text) if name))

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
        for literal, name, _, _ in _fields(self.text):
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


def _fields(text: str) -> list[tuple[str, str | None, str | None, str | None]]:
    return list(string.Formatter().parse(text))


BUILTIN_TEMPLATE = JudgeTemplate("p1", BUILTIN, JUDGE_PROMPT_TEXT)


# ------------------------------------------------------------ prompts read from users' files
# Every judge prompt a user's file supplies goes through these: ``--judge-prompt`` here, and
# the BEAM and LoCoMo-Plus prompts that ``results/`` reads from the user's copy of those
# datasets (Python source, parsed, never run). Refusals are one line naming the file and field.

MAX_FORMAT_WIDTH = 10_000  # a width or precision in a ``{name:spec}`` placeholder
MAX_SOURCE_TOKENS = 200_000  # a prompt file of Python is a few assignments of strings
_DIGITS = re.compile(r"\d+")
_NEW_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_BINDING_STATEMENTS = {
    ast.Assign: "an unpacking assignment",
    ast.AugAssign: "an augmented assignment",
    ast.For: "a for loop",
    ast.AsyncFor: "a for loop",
    ast.With: "a with statement",
    ast.AsyncWith: "a with statement",
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.FunctionDef: "a def",
    ast.AsyncFunctionDef: "a def",
    ast.ClassDef: "a class",
    ast.Delete: "a del",
    ast.Try: "an except clause",
    ast.Match: "a match statement",
}


def format_fields(
    text: str, where: str, error: type[BadInput] = BadInput
) -> list[tuple[str, str | None, str | None, str | None]]:
    """``string.Formatter().parse`` of a prompt template; ``error`` (one line, naming ``where``)
    for an unmatched brace, a placeholder inside a format spec (the value would become the spec)
    or a width or precision over ``MAX_FORMAT_WIDTH`` (``{pred:>3000000000}`` is 3 GB)."""
    try:
        fields = _fields(text)
    except ValueError as exc:
        raise error(f"{where}: {exc} (write a literal brace as {{{{ or }}}})") from None
    for _, name, spec, _ in fields:
        if not spec:
            continue
        shown = printable(f"{{{name}:{spec[:40]}}}")
        if "{" in spec or "}" in spec:
            raise error(f"{where}: {shown}: a placeholder inside a format spec is not supported")
        digits = [d for d in _DIGITS.findall(spec) if len(d) > 5 or int(d) > MAX_FORMAT_WIDTH]
        if digits:
            raise error(
                f"{where}: {shown}: width or precision {digits[0][:20]} is over "
                f"{MAX_FORMAT_WIDTH:,} characters"
            )
    return fields


def _token_count(text: str) -> int:
    """Python tokens in ``text``, counted up to one past ``MAX_SOURCE_TOKENS`` (a tokenizer
    error stops the count: the parser then says what is wrong, and where)."""
    count = 0
    try:
        for _ in tokenize.generate_tokens(io.StringIO(text).readline):
            count += 1
            if count > MAX_SOURCE_TOKENS:
                break
    except (tokenize.TokenError, SyntaxError):
        pass
    return count


def python_source(
    path: Path, limit: int, hint: str = "", error: type[BadInput] = BadInput
) -> ast.Module:
    """A prompt file of Python (a dataset's ``prompts.py``) parsed, never run: at most ``limit``
    bytes read and ``MAX_SOURCE_TOKENS`` tokens parsed; ``error`` in one line naming the file
    when it is unreadable, too large, not Python or nested too deeply for the parser."""
    try:
        with regular_files_only():  # a FIFO is refused, never waited on
            text = decode(ReadBudget(limit, hint).read_file(path))
    except InputError as exc:
        raise error(f"{path}: {exc}") from None
    if _token_count(text) > MAX_SOURCE_TOKENS:
        raise error(
            f"{path}: more than {MAX_SOURCE_TOKENS:,} Python tokens "
            "(a prompt file is a few assignments of text)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an invalid escape in a prompt's text, say
            return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise error(f"{path}: line {exc.lineno}: not readable Python: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise error(f"{path}: an expression nested too deeply to parse") from None
    except ValueError as exc:  # a NUL byte
        raise error(f"{path}: not readable Python: {exc}") from None


def _binds(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Name):
        return node.id == name and not isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.alias):  # ``from x import *`` may bind any name
        return node.name == "*" or name == (node.asname or node.name.split(".")[0])
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return node.name == name
    return isinstance(node, ast.MatchMapping) and node.rest == name


def _bindings(body: list[ast.stmt], name: str) -> list[tuple[Any, ast.stmt]]:
    """(node, its statement) for everything in the scope of the statements ``body`` that binds
    ``name`` (assignments, ``del``, imports, definitions, loop and ``with`` targets, ``except
    ... as``, ``:=``), in source order; the names of nested scopes are their own."""
    found = []
    stack: list[tuple[Any, ast.stmt]] = [(node, node) for node in body]
    while stack:
        node, stmt = stack.pop()
        if isinstance(node, _NEW_SCOPES):
            if getattr(node, "name", None) == name:
                found.append((node, stmt))
            continue
        if isinstance(node, ast.AnnAssign) and node.value is None:
            continue  # an annotation alone binds nothing
        if _binds(node, name):
            found.append((node, stmt))
        stack.extend(
            (child, child if isinstance(child, ast.stmt) else stmt)
            for child in ast.iter_child_nodes(node)
        )
    return sorted(found, key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def last_binding(body: list[ast.stmt], name: str) -> tuple[Any, ast.stmt] | None:
    """(node, its statement) of the last binding of ``name`` in the scope of the statements
    ``body``, the one whose value Python keeps (a conditional one read as taken); None when
    nothing binds it."""
    found = _bindings(body, name)
    return found[-1] if found else None


def assigned_value(
    body: list[ast.stmt], name: str, file: object, error: type[BadInput] = BadInput
) -> ast.expr | None:
    """The expression the last binding of ``name`` in the scope of ``body`` assigns
    (``last_binding``); None when nothing binds it; ``error`` naming the file and line when the
    last binding is not ``name = value`` (``+=``, an import, a ``def``, a loop target ...)."""
    found = last_binding(body, name)
    if found is None:
        return None
    node, stmt = found
    if isinstance(stmt, ast.Assign) and any(t is node for t in stmt.targets):
        return stmt.value
    if isinstance(stmt, ast.AnnAssign) and stmt.target is node and stmt.value is not None:
        return stmt.value
    what = _BINDING_STATEMENTS.get(type(stmt)) or (
        "an assignment expression (:=)" if isinstance(node, ast.Name) else "an except clause"
    )
    raise error(f"{file}: line {node.lineno}: {name}: last bound by {what}, not by {name} = text")


def describe_expression(node: ast.expr) -> str:
    """What an expression is, in a few words, for a refusal (``a variable (PREFIX)``)."""
    if isinstance(node, ast.Name):
        return f"a variable ({node.id})"
    if isinstance(node, ast.Call):
        return "a call"
    if isinstance(node, ast.JoinedStr):
        return "an f-string with placeholders"
    if isinstance(node, ast.Constant):
        return f"a {type(node.value).__name__} constant"
    if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        return f"a {type(node).__name__.lower()}"
    return "an expression"


def literal_text(node: ast.expr, where: str, error: type[BadInput] = BadInput) -> str:
    """The text of a plain string literal (adjacent literals concatenated, an f-string without
    placeholders included); ``error`` naming ``where`` for anything else (a variable, a call,
    an f-string with placeholders, ``+``): a prompt is read, never computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    raise error(f"{where}: {describe_expression(node)}, not a plain string literal")


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


# Words before the first verdict word that make it no verdict ("I cannot tell if this is
# correct" is not CORRECT): the reply is then unreadable, counted apart, never a vote.
_HEDGE = re.compile(
    r"\b(?:cannot|can['’]?t|unsure|unclear|unknown|unable|if|whether|maybe|perhaps|possibly|"
    r"might)\b",
    re.IGNORECASE,
)


def parse_verdict(text: str) -> bool | None:
    """True for CORRECT, False for WRONG/INCORRECT, else None (unreadable).

    A ``"label": "..."`` field (the JSON answer some published grading prompts ask for) decides
    when present; otherwise the first such word wins (``not correct`` is WRONG), unless a hedge
    comes before it (``cannot``, ``if``, ``unsure``, ... : ``_HEDGE``), which makes the reply
    no verdict.
    """
    label = _LABEL.search(text)
    if label is not None and label.group(1).upper() in ("CORRECT", "WRONG", "INCORRECT"):
        return label.group(1).upper() == "CORRECT"
    previous = ""
    for match in _WORD.finditer(text):
        word = match.group().upper()
        if word in ("WRONG", "INCORRECT", "CORRECT"):
            if _HEDGE.search(text[: match.start()]):
                return None
            return word == "CORRECT" and previous != "NOT"
        previous = word
    return None


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


@dataclass(frozen=True)
class Grading:
    """One judge call of a probe: which prompt, which run (0-based), and its verdict."""

    prompt: str
    run: int
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "prompt": self.prompt,
            "run": self.run,
            "correct": v.correct,
            "raw": v.raw,
            "input_tokens": v.input_tokens,
            "output_tokens": v.output_tokens,
            "cache_hit": v.cache_hit,
        }


@dataclass
class JudgePanel:
    """The run's judge: for each grading prompt, one model per run."""

    templates: list[JudgeTemplate]
    models: list[list[BaseChatModel]] = field(default_factory=list)

    def grade(
        self, question: str, answers: Sequence[str], reply: str, *, abstention: bool
    ) -> list[Grading]:
        """Every prompt's every run on one reply, prompt by prompt, run by run."""
        return [
            Grading(
                template.label,
                run,
                judge_reply(
                    model, question, answers, reply, abstention=abstention, template=template
                ),
            )
            for template, row in zip(self.templates, self.models, strict=True)
            for run, model in enumerate(row)
        ]


def build_panel(
    spec: str,
    templates: list[JudgeTemplate],
    runs: int,
    *,
    temperature: float = 0.0,
    base_url: str | None = None,
    cache: Any = None,
    callbacks: list[Any] | None = None,
) -> JudgePanel:
    """A panel of ``runs`` models per template, each sending its usage to ``callbacks``
    (``judge_core.judge_models``).

    Offline, every run is the same deterministic judge. A provider's run 0 uses ``cache`` as is
    (the key a single judge call always had); run ``i`` > 0 a ``RunKeyedCache`` of its own, on a
    shallow copy of the same client.
    """
    panel = JudgePanel(templates)
    for template in templates:
        panel.models.append(
            judge_models(
                spec,
                runs,
                base_url=base_url,
                temperature=temperature,
                cache=cache,
                callbacks=callbacks,
                offline=lambda text=template.text: OfflineJudge(prompt_text=text),
            )
        )
    return panel


def record_fields(gradings: list[Grading]) -> dict[str, Any]:
    """A probe record's judge fields for its gradings (see ``ProbeRecord``).

    ``judge_correct`` is the majority verdict of the first prompt's runs (``majority_vote``:
    unreadable runs ignored, a tie to the earliest run); ``judge_raw`` that prompt's first run's
    output; tokens are summed over every call; ``judge_cache_hit`` says every call was a hit.
    """
    first = [g for g in gradings if g.prompt == gradings[0].prompt]
    return {
        "judge_correct": majority_vote([g.verdict.correct for g in first]),
        "judge_raw": first[0].verdict.raw,
        "judge_cache_hit": all(g.verdict.cache_hit for g in gradings),
        "judge_input_tokens": sum(g.verdict.input_tokens for g in gradings),
        "judge_output_tokens": sum(g.verdict.output_tokens for g in gradings),
        "judge_calls": len(gradings),
        "judge_verdicts": [g.to_dict() for g in gradings],
    }
