"""Prompts read from a user's files: a benchmark's own grading prompts, read from the user's
checkout of it, and ``--judge-prompt`` files; every judge prompt a user's file supplies goes
through these. Python source is parsed, never run; refusals are one line naming the file and
field.

``python_source`` (a ``prompts.py`` parsed, never run, bounded in bytes, tokens and depth),
``assigned_value`` (the value Python keeps: the last binding, ``last_binding``),
``literal_text`` (plain string literals only, ``describe_expression`` naming anything else) and
``format_fields`` (a template's placeholders, with bounded format widths).
"""

from __future__ import annotations

import ast
import io
import re
import string
import tokenize
import warnings
from pathlib import Path
from typing import Any

from memory_lab.errors import BadInput
from memory_lab.text.limits import InputError, ReadBudget, decode, printable, regular_files_only

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


def template_fields(text: str) -> list[tuple[str, str | None, str | None, str | None]]:
    """``string.Formatter().parse`` of a template, as a list (ValueError when malformed)."""
    return list(string.Formatter().parse(text))


def format_fields(
    text: str, where: str, error: type[BadInput] = BadInput
) -> list[tuple[str, str | None, str | None, str | None]]:
    """``string.Formatter().parse`` of a prompt template; ``error`` (one line, naming ``where``)
    for an unmatched brace, a placeholder inside a format spec (the value would become the spec)
    or a width or precision over ``MAX_FORMAT_WIDTH`` (``{pred:>3000000000}`` is 3 GB)."""
    try:
        fields = template_fields(text)
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
