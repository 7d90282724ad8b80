"""Input bounds shared by dialogue files, dataset imports and results folders: bytes read,
nesting, values, what a prompt delta may build.

Every reader checks a file's or zip entry's declared size first and then reads in chunks, so a
file that grows or a zip whose header lies costs at most the limit plus one chunk. Helpers raise
``InputError`` with a message that does not name the file; the caller adds the file and field.
A results folder's files are opened with ``open_regular`` (no pipe, device or link), as are the
files a dialogue source reads inside ``regular_files_only()``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

from memory_lab.errors import BadInput

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 40
MAX_NODES = 2_000_000  # values after YAML aliases are expanded, as hashing would see them
_CHUNK = 1024 * 1024
# what a corrupt, truncated, encrypted or exotic zip raises while it is opened or read
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)

# A results folder's files (``results.read``, ``memory-lab view``): each a regular file in the
# folder (no pipe, device or symbolic link), within these bounds, checked before reading.
MAX_RECORDS_BYTES = 4 * 1024**3  # records.jsonl (prompts stored once: ~8 MB per 1M-token cell)
MAX_RECORD_LINE_BYTES = 256 * 1024**2  # one line of it: room for a whole prompt, escaped
MAX_RUN_FILE_BYTES = MAX_FILE_BYTES  # run.json (a few KB for a run of the built-in suite)
# A prompt restored from its delta (``log.prompt_store``): checked before it is built.
MAX_PROMPT_CHARS = 32 * 1024**2  # ~8M tokens; a 1M-token history is ~3.4M characters
MAX_DELTA_PIECES = 1_000_000  # the encoder writes a handful (each copy >= 64 characters)
MAX_RESTORED_CHARS = 4 * 1024**3  # every prompt one read restores, together (~1.4G: 1M tokens)


class InputError(BadInput):
    """A file that is too large, unreadable or malformed; the message names no file."""


class ReadBudget:
    """The bytes one load may read across all its files and zip entries (``limit`` in all).

    ``hint`` is appended to a refusal (e.g. the option that raises the limit).
    """

    def __init__(self, limit: int = MAX_FILE_BYTES, hint: str = ""):
        self.limit = limit
        self.left = limit
        self.hint = f" ({hint})" if hint else ""

    def _refusal(self, what: str) -> InputError:
        if self.left == self.limit:
            return InputError(f"{what}; the limit is {self.limit:,}{self.hint}")
        return InputError(
            f"{what}, more than the {self.left:,} left of the limit of {self.limit:,} bytes "
            f"for all files read together{self.hint}"
        )

    def _take(self, stream: IO[bytes], declared: int, what: str) -> bytes:
        if declared > self.left:
            raise self._refusal(f"{what} {declared:,} bytes")
        chunks, total = [], 0
        while chunk := stream.read(min(_CHUNK, self.left - total + 1)):
            chunks.append(chunk)
            total += len(chunk)
            if total > self.left:
                raise self._refusal(f"{what} more than {self.left:,} bytes (it said {declared:,})")
        self.left -= total
        return b"".join(chunks)

    def check_size(self, path: Path) -> None:
        """InputError when ``path`` alone is larger than the limit (a zip, whose directory is
        read whole before any entry)."""
        try:
            info = path.stat()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}") from None
        if _REGULAR_ONLY.get() and not stat.S_ISREG(info.st_mode):
            raise InputError(not_regular(info.st_mode))
        size = info.st_size
        if size > self.limit:
            raise InputError(f"is {size:,} bytes; the limit is {self.limit:,}{self.hint}")

    def read_file(self, path: Path) -> bytes:
        """The bytes of ``path``; InputError when too large or unreadable (or not a regular
        file, inside ``regular_files_only()``)."""
        try:
            with open_regular(path) if _REGULAR_ONLY.get() else open(path, "rb") as fh:
                return self._take(fh, path.stat().st_size, "is")
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}") from None

    def read_zip_entry(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
        """The decompressed bytes of one entry, checked against its declared size and read in
        chunks; InputError when too large, corrupt or encrypted."""
        try:
            with zf.open(info) as fh:
                return self._take(fh, info.file_size, "decompresses to")
        except ZIP_ERRORS as exc:
            raise InputError(f"not a readable zip entry: {exc}") from None


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)
_REGULAR_ONLY: ContextVar[bool] = ContextVar("regular_only", default=False)


def not_regular(mode: int) -> str:
    """Why a file of ``mode`` is not read: what it is instead of a regular file."""
    if stat.S_ISLNK(mode):
        return "is a symbolic link; a results folder's files are read only as regular files in it"
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return f"is {kind}, not a regular file"


def open_regular(
    path: str | Path, limit: int | None = None, limit_name: str = "", *, follow: bool = True
) -> IO[bytes]:
    """``path`` open for reading (binary) when it is a regular file of at most ``limit`` bytes;
    InputError saying what it is otherwise (a FIFO, a device, a folder; a symbolic link unless
    ``follow``), naming the limit (``limit_name``). A FIFO is never waited on: the file is
    checked before it is opened, opened without blocking and checked again once open."""
    try:
        mode = os.stat(path, follow_symlinks=follow).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(not_regular(mode))
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags if follow else flags | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the two looks
            raise InputError(not_regular(info.st_mode))
        if limit is not None and info.st_size > limit:
            named = f" ({limit_name})" if limit_name else ""
            raise InputError(f"is {info.st_size:,} bytes; the limit is {limit:,}{named}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def regular_files_only() -> Iterator[None]:
    """``ReadBudget`` reads (a dialogue file, a dataset an importer reads) in the block refuse
    what is not a regular file (``open_regular``) instead of reading a pipe or a device: for
    sources named by a file someone else wrote, such as a results folder's run.json."""
    token = _REGULAR_ONLY.set(True)
    try:
        yield
    finally:
        _REGULAR_ONLY.reset(token)


def decode(data: bytes) -> str:
    """UTF-8 text; InputError naming the offset of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc}") from None


@contextmanager
def parse_errors(kind: str, invalid: type[Exception]) -> Iterator[None]:
    """Parsing ``kind`` (JSON, YAML) in the block fails with one line: ``invalid`` (the
    parser's own error), too deep to read, or an integer of more digits than Python converts."""
    try:
        yield
    except (invalid, ValueError) as exc:  # ValueError: sys.get_int_max_str_digits()
        raise InputError(f"not valid {kind}: {exc}") from None
    except RecursionError:
        raise InputError(f"{kind} nested too deeply to read (limit {MAX_DEPTH} levels)") from None


def parse_json(text: str) -> Any:
    """``json.loads`` with one-line errors: invalid JSON, too deep, an over-long integer."""
    with parse_errors("JSON", json.JSONDecodeError):
        return json.loads(text)


def bounds_problem(doc: Any) -> str | None:
    """Why a parsed document is unsafe to use (too deep, too large once aliases expand, a
    non-string key, a lone surrogate, NaN or infinity), or None. Walks iteratively and stops at
    the first limit, so a YAML alias bomb is refused in milliseconds instead of being expanded
    by hashing."""
    stack: list[tuple[Any, int, str]] = [(doc, 0, "")]
    nodes = 0
    while stack:
        value, depth, where = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return (
                f"expands to more than {MAX_NODES:,} values (YAML aliases?); "
                "a dialogue is far smaller"
            )
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels at {where or 'the top'}"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"key {key!r} at {where or 'the top'} must be a string"
                stack.append((item, depth + 1, f"{where}.{key}" if where else key))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{where}[{i}]") for i, item in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{where or 'a string'} holds an invalid character (a lone surrogate)"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{where or 'a value'} is {value}; numbers must be finite"
    return None


def printable(text: object) -> str:
    """``text`` with control and other non-printable characters escaped, for one-line output."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
