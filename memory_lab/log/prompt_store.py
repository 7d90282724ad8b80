"""Prompts stored once: a turn or probe record holds its prompt as a delta against the previous
prompt of its cell, so the bytes of records per exchange stay flat as a history grows.

A full-context memory (``buffer``) sends the whole history in every prompt; recorded whole, the
records of a cell would grow with the square of its history. On disk (``records.jsonl`` and the
cells' parts) a ``turn`` or ``probe`` record therefore carries its prompt either whole, as
``"prompt": "..."`` (a cell's first prompt, a prompt that shares too little with the one before,
every record of a run from before deltas), or as::

    "prompt_delta": {"pieces": ["literal text", [start, end], ...], "digest": "<16 hex>"}

The prompt is its pieces joined: a string is literal text, ``[start, end]`` the characters
``start:end`` of the previous prompt of the same cell (that of the last record before it, in
the cell's record order, that had one). ``digest`` is the restored prompt's BLAKE2b-64 (UTF-8),
checked on reading. Spans copy the previous prompt in order, never overlapping, so a prompt is
at most its previous one plus its literal text; a delta of more than ``MAX_DELTA_PIECES``
pieces, with spans out of order, or that would build more than ``MAX_PROMPT_CHARS``
characters is refused before anything is built (``memory_lab.text.limits``). A record without
a prompt (``--no-prompts``, an exchange without a user turn) carries neither and leaves the
cell's previous prompt as it was.

``PromptEncoder`` encodes one cell's records as the cell writes them
(``run/executors/cells.run_cell``, whatever executor runs it); ``PromptDecoder`` restores them
in the one function that reads records (``results.read.read_records``), so every reader shows
the prompt exactly as the cell computed it. A record decodes from its own cell's records only:
each execution of a cell starts a fresh encoder (its first prompt is whole), the decoder follows
every cell apart and forgets a cell's prompt when its ``cell`` record closes the block, so
blocks kept, adopted or appended by a resume decode as they were written.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memory_lab.errors import BadInput
from memory_lab.text.limits import MAX_DELTA_PIECES, MAX_PROMPT_CHARS

DELTA_FIELD = "prompt_delta"
PROMPT_KINDS = ("turn", "probe")  # the record types that carry a prompt
ANCHOR = 64  # characters of a prompt looked up in the previous one to resume copying
MIN_COPY = 64  # a shorter shared run is written as literal text
MAX_MISSES = 256  # failed look-ups per prompt, after which the rest is literal
PIECE_COST = 24  # about the bytes of one [start, end] piece in JSON, to weigh a delta
Pieces = list[str | list[int]]


class DeltaError(BadInput):
    """A ``prompt_delta`` that does not restore, or would restore a prompt beyond the bounds
    (``MAX_DELTA_PIECES`` pieces, ``MAX_PROMPT_CHARS`` characters); the message names the
    field."""


def prompt_digest(prompt: str) -> str:
    return hashlib.blake2b(prompt.encode("utf-8"), digest_size=8).hexdigest()


def shared_length(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` share from their start (compared in slices,
    not character by character: a history of megabytes is compared in milliseconds)."""
    limit = min(len(a) - i, len(b) - j)
    n, step = 0, 1024
    while n < limit:
        size = min(step, limit - n)
        if a[i + n : i + n + size] == b[j + n : j + n + size]:
            n += size
            step = min(step * 2, 1 << 16)
            continue
        lo, hi = 0, size  # the first lo characters are shared, the first hi are not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[i + n : i + n + mid] == b[j + n : j + n + mid]:
                lo = mid
            else:
                hi = mid
        return n + lo
    return n


def delta_pieces(previous: str, prompt: str) -> Pieces:
    """``prompt`` as pieces copied from ``previous`` (in order, each at least ``MIN_COPY``
    long) and literal text between them.

    The longest common prefix is copied first (a growing history: the previous prompt up to its
    question); then from each point of ``prompt`` (where a copy ended, else each line start)
    its next ``ANCHOR`` characters are looked up in ``previous`` after the last copy and the
    match is copied as far as it goes (a history whose oldest part a context limit cut: the
    kept text resumes further on). Look-ups stop after ``MAX_MISSES`` misses.
    """
    pieces: Pieces = []
    shared = shared_length(previous, 0, prompt, 0)
    if shared < MIN_COPY:
        shared = 0
    else:
        pieces.append([0, shared])
    literal = i = after = shared
    misses = 0
    while i + ANCHOR <= len(prompt) and misses < MAX_MISSES:
        j = previous.find(prompt[i : i + ANCHOR], after)
        n = shared_length(previous, j, prompt, i) if j >= 0 else 0
        if n < MIN_COPY:
            misses += 1
            line = prompt.find("\n", i + 1)
            i = len(prompt) if line < 0 else line
            continue
        if literal < i:
            pieces.append(prompt[literal:i])
        pieces.append([j, j + n])
        i = literal = i + n
        after = j + n
    if literal < len(prompt):
        pieces.append(prompt[literal:])
    return pieces


def join_pieces(previous: str, pieces: Pieces) -> str:
    return "".join(p if isinstance(p, str) else previous[p[0] : p[1]] for p in pieces)


class PromptEncoder:
    """One cell's records as written: each prompt after the first as a delta when that is
    smaller (``encode``, in the cell's record order)."""

    def __init__(self) -> None:
        self.previous: str | None = None

    def encode(self, record: dict[str, Any]) -> dict[str, Any]:
        prompt = record.get("prompt")
        if record.get("type") not in PROMPT_KINDS or not isinstance(prompt, str):
            return record
        previous, self.previous = self.previous, prompt
        if previous is None:
            return record
        pieces = delta_pieces(previous, prompt)
        copies = sum(not isinstance(p, str) for p in pieces)
        cost = sum(len(p) for p in pieces if isinstance(p, str)) + PIECE_COST * (copies + 1)
        if not copies or cost >= len(prompt):
            return record
        out = {k: v for k, v in record.items() if k != "prompt"}
        out[DELTA_FIELD] = {"pieces": pieces, "digest": prompt_digest(prompt)}
        return out


class PromptDecoder:
    """Restores the prompts of records read in their file's order (``restore``), following
    each cell apart."""

    def __init__(self) -> None:
        self.previous: dict[tuple[str, str], str] = {}

    def restore(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with its prompt restored (a checked record: ``records.record_problem``).
        A delta that does not restore is a DeltaError (a ValueError) saying why, naming the
        field; one that would build more than its bounds is refused before it is built."""
        key = (record["memory"], record["dialogue"])
        if record["type"] == "cell":
            self.previous.pop(key, None)  # the block ends: a later block of it starts afresh
            return record
        if DELTA_FIELD in record:
            delta = record[DELTA_FIELD]
            record = {k: v for k, v in record.items() if k != DELTA_FIELD}
            record["prompt"] = self._joined(record, delta, self.previous.get(key))
        prompt = record.get("prompt")
        if record["type"] in PROMPT_KINDS and isinstance(prompt, str):
            self.previous[key] = prompt
        return record

    @staticmethod
    def _joined(record: dict[str, Any], delta: Any, previous: str | None) -> str:
        where = f"a {record['type']} record's field {DELTA_FIELD!r}"
        if record["type"] not in PROMPT_KINDS:
            raise DeltaError(f"{where}: only turn and probe records carry a prompt")
        pieces = delta.get("pieces") if isinstance(delta, dict) else None
        digest = delta.get("digest") if isinstance(delta, dict) else None
        if not isinstance(pieces, list) or not isinstance(digest, str):
            raise DeltaError(f"{where} must be an object with 'pieces' (a list) and 'digest'")
        if len(pieces) > MAX_DELTA_PIECES:
            raise DeltaError(
                f"{where} has {len(pieces):,} pieces; the limit is {MAX_DELTA_PIECES:,} "
                "(MAX_DELTA_PIECES)"
            )
        for piece in pieces:
            if not isinstance(piece, str) and not _is_span(piece):
                raise DeltaError(f"{where}: a piece must be text or [start, end], got {piece!r}")
        if previous is None:
            raise DeltaError(
                f"{where} copies from an earlier prompt of its cell "
                f"({record['memory']}, {record['dialogue']}), and no earlier record of it has one"
            )
        unrestorable = DeltaError(
            f"{where} does not restore its prompt from the cell's previous prompt "
            f"(records of the cell ({record['memory']}, {record['dialogue']}) missing, "
            "reordered or changed)"
        )
        size = _built_size(where, pieces, len(previous), unrestorable)
        if size > MAX_PROMPT_CHARS:
            raise DeltaError(
                f"{where} would build a prompt of {size:,} characters; the limit is "
                f"{MAX_PROMPT_CHARS:,} (MAX_PROMPT_CHARS)"
            )
        prompt = join_pieces(previous, pieces)
        if prompt_digest(prompt) != digest:
            raise unrestorable
        return prompt


def _built_size(where: str, pieces: Pieces, previous: int, unrestorable: Exception) -> int:
    """The length of the prompt ``pieces`` build, computed without building it. Spans copy the
    previous prompt (``previous`` characters) in order without overlapping, as the encoder
    writes them, so a prompt is at most the previous one plus its literal text; a span past
    its end is ``unrestorable``."""
    size = copied = 0
    for n, piece in enumerate(pieces, 1):
        if isinstance(piece, str):
            size += len(piece)
            continue
        if piece[1] > previous:
            raise unrestorable
        if piece[0] < copied:
            raise DeltaError(
                f"{where}: piece {n}, {piece}, copies text before the end of the copy before it "
                f"(at {copied}); a delta copies the previous prompt in order"
            )
        size += piece[1] - piece[0]
        copied = piece[1]
    return size


def _is_span(piece: Any) -> bool:
    return (
        type(piece) is list
        and len(piece) == 2
        and all(type(n) is int for n in piece)
        and 0 <= piece[0] <= piece[1]
    )


def without_prompt(record: dict[str, Any]) -> dict[str, Any]:
    """A turn or probe record with its prompt None, however it was stored (as ``--no-prompts``
    records it); any other record as it is."""
    if record["type"] not in PROMPT_KINDS:
        return record
    out = {k: v for k, v in record.items() if k != DELTA_FIELD}
    out["prompt"] = None
    return out
