"""Writing into a results folder without following a link.

A results folder can come from anyone (a colleague's run, a download): a symbolic link planted
in it (``charts/recall.png -> ~/.bashrc``, ``charts -> /etc``) must not turn a ``memory-lab
report`` into a write elsewhere. Every file a command writes into a results folder goes through
here: created with ``O_NOFOLLOW`` (a link in its place is refused in one line, exit 2), in a
folder that is not itself a link; a file replaced atomically is written to a temporary file
created fresh beside it (``O_EXCL``) and renamed over its name.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from memory_lab.errors import BadInput

_WRITE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _refuse(path: Path) -> BadInput:
    return BadInput(
        f"{path} is a symbolic link: memory-lab does not write through links in a results "
        "folder (remove it, or give another folder)"
    )


def private_folder(folder: str | Path) -> Path:
    """``folder``, made if need be, and the folders made for it, readable by its owner alone
    (0700: what a run keeps, prompts and recalled facts among it, is nobody else's); one that
    was there already keeps its mode."""
    folder = Path(folder)
    missing = []
    at = folder
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for made in reversed(missing):
        made.mkdir(mode=0o700, exist_ok=True)
        os.chmod(made, 0o700)  # whatever the umask
    return folder


def check_folder(folder: str | Path) -> Path:
    """``folder``, made if need be (``private_folder``); BadInput in one line when it is a
    symbolic link."""
    folder = Path(folder)
    if folder.is_symlink():
        raise _refuse(folder)
    return private_folder(folder)


def open_fd(path: str | Path, flags: int = os.O_TRUNC, mode: int = 0o600) -> int:
    """A descriptor for writing ``path`` (created if missing; ``flags`` adds to it: truncate by
    default, ``os.O_APPEND``, ``os.O_EXCL``), never through a link: BadInput for one at
    ``path`` or for a folder that is one. A file it creates is its owner's alone (0600)."""
    path = Path(path)
    if path.parent.is_symlink():
        raise _refuse(path.parent)
    try:
        return os.open(path, _WRITE | flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path) from None
        raise


def open_new(path: str | Path, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``path`` opened for writing (``w`` or ``wb``; ``a`` appends), truncated, never through
    a link (``open_fd``); keyword arguments as ``open``'s (``encoding``, ``newline``)."""
    flags = os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    return os.fdopen(open_fd(path, flags), mode, **kwargs)


@contextmanager
def replacing(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """A file to write that replaces ``path`` atomically when the block ends (a reader sees
    the old file or the new, never half of one; an error leaves the old one): written to
    ``.<name>.tmp`` beside it, created fresh (whatever was at that name, a link included, is
    removed first, never followed), then renamed over ``path``. A link at ``path`` itself is
    refused, as ``open_new`` refuses one."""
    path = Path(path)
    if path.is_symlink():
        raise _refuse(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    try:
        with os.fdopen(open_fd(tmp, os.O_EXCL), mode, **kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_replacing(path: str | Path, data: str | bytes) -> Path:
    """``data`` written to ``path`` atomically (``replacing``); returns the path."""
    with replacing(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return Path(path)
