"""One run per results folder, and a resume only of the configuration the run started with.

``hold_folder`` takes an exclusive ``fcntl.flock`` on ``<folder>/.lock`` for a run's whole
life (``run_benchmark`` before it writes anything there, ``resume_benchmark`` before it
touches records or parts); a second run or a resume of a live run is refused with one line
naming the folder and the holder's pid. The operating system releases the lock when its
process ends, however it ends (``kill -9`` included), so a lock is never stale. A run that ends
(however it ends, short of being killed) removes the file while it still holds the lock; a
process that opened the file before it was removed sees, once it gets the lock, that the path
no longer names its file and takes the lock again on a new one. The descriptor is not
inheritable (Python's default), so ``--jobs`` workers (spawned: fork then exec) and Ray's
processes (exec'd) never hold it, and ``--concurrency`` threads share the run's. Readers
(``report``, ``export``) take no lock.

``config_checksums`` hashes each ``run.json`` field that shapes results or tells how they were
made (``CHECKSUM_FIELDS``); the run records the hashes under ``config_sha256`` and
``check_config`` refuses a resume when a field no longer matches. What a run updates as it
goes (status, timestamps, errors, resumes) and what only describes its machine or command
line (argv, package versions, platform, run id) is left out.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_lab.errors import BadInput

LOCK_FILE = ".lock"
CHECKSUM_KEY = "config_sha256"
CHECKSUM_FIELDS = (
    "config",
    "memories",
    "memory_specs",
    "dialogue_sources",
    "dialogues",
    "resources",
    "models",
    "prompt_template",
    "cache_dir",
    "judge",
    "context_limit_source",
    "pricing",
)


class FolderInUse(BadInput, OSError):
    """Another live process holds the results folder's lock."""


@contextmanager
def hold_folder(folder: str | Path) -> Iterator[None]:
    """Hold ``folder``'s lock (it must exist) until the block ends; FolderInUse when a live
    process holds it. The lock file is removed when the block ends."""
    path = Path(folder) / LOCK_FILE
    fd = _lock(path, folder)
    try:
        os.ftruncate(fd, 0)
        holder = {"pid": os.getpid(), "host": socket.gethostname()}
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        try:
            path.unlink()  # still held: whoever waits on this file retries on a new one
        except OSError:
            pass
        os.close(fd)  # releases the lock


def _lock(path: Path, folder: str | Path) -> int:
    """A descriptor of ``path`` locked by this process (the file ``path`` names now)."""
    while True:
        try:  # never through a link planted in the folder
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BadInput(f"{path} is a symbolic link: remove it") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderInUse(
                f"{folder}: another run is using this results folder ({holder}); "
                "wait for it to end or stop it first"
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed it as we opened it: lock the new one


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it (it may not have written it yet)."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0))
        return f"pid {int(holder['pid'])} on {holder['host']}"
    except (ValueError, KeyError, TypeError, OSError):
        return "a process that has not yet said which"


def config_checksums(info: dict[str, Any]) -> dict[str, str]:
    """The SHA-256 of each ``CHECKSUM_FIELDS`` field of ``info`` as ``run.json`` holds it."""
    return {field: field_hash(info.get(field)) for field in CHECKSUM_FIELDS}


def field_hash(value: Any) -> str:
    value = json.loads(json.dumps(value, default=str))  # as run.json gives it back
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_config(info: dict[str, Any], run_file: Path) -> None:
    """Refuse (ValueError naming ``run_file`` and the fields) a run.json whose configuration
    changed since the run started. One written before checksums is accepted with a warning."""
    recorded = info.get(CHECKSUM_KEY)
    if recorded is None:
        print(
            f"memory-lab: warning: {run_file} has no {CHECKSUM_KEY} (written by an older "
            "memory-lab); resuming without checking that its configuration is unchanged",
            file=sys.stderr,
        )
        return
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise BadInput(f"{run_file}: {CHECKSUM_KEY} must map fields to hashes; cannot resume")
    changed = sorted(k for k, v in recorded.items() if field_hash(info.get(k)) != v)
    if changed:
        raise BadInput(
            f"{run_file}: its configuration changed since the run started "
            f"({', '.join(changed)} no longer match {CHECKSUM_KEY}); cannot resume it — "
            "start a new run instead"
        )
