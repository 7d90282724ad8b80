"""A private PostgreSQL cluster for tests: a real server, started and stopped around a session.

``initdb`` and ``pg_ctl`` run as the ``postgres`` user when the tests run as root (PostgreSQL
refuses to run as root), with trust authentication on 127.0.0.1 and a free port, the socket and
data in a temporary folder that is removed afterwards. Debian's ``postgresql`` package provides
the binaries (``/usr/lib/postgresql/*/bin``); the PyPI package ``pgserver`` bundles a PostgreSQL
with the ``vector`` extension, used for the Store's semantic index.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SERVER_USER = "postgres"


def debian_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def pgvector_bin_dir() -> Path | None:
    """The bin folder of pgserver's bundled PostgreSQL (with pgvector), or None."""
    spec = importlib.util.find_spec("pgserver")  # located, not imported: import has side effects
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if (folder / "initdb").exists() else None


def _version(path: str) -> tuple[int, ...]:
    return tuple(int(p) for p in Path(path).parent.parent.name.split(".") if p.isdigit())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", SERVER_USER, "--", *cmd]


@contextmanager
def running_cluster(bin_dir: Path) -> Iterator[str]:
    """Start a throwaway cluster with ``bin_dir``'s binaries; yield its URL; stop and remove it."""
    root = Path(tempfile.mkdtemp(prefix="memory-lab-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
    data, log, port = root / "data", root / "server.log", _free_port()

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            _as_server_user([str(bin_dir / cmd[0]), *cmd[1:]]),
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )

    try:
        run("initdb", "-D", str(data), "-A", "trust", "-U", SERVER_USER, "-E", "UTF8",
            "--no-locale", "--no-sync")  # fmt: skip
        options = f"-h 127.0.0.1 -p {port} -k {root} -F"  # -F: no fsync, a test server
        run("pg_ctl", "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "30", "start")
    except subprocess.CalledProcessError as exc:
        detail = log.read_text() if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"test PostgreSQL did not start: {exc.stderr}\n{detail}") from exc
    try:
        yield f"postgresql://{SERVER_USER}@127.0.0.1:{port}/postgres"
    finally:
        run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
