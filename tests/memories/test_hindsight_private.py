"""The ``hindsight`` memory's PostgreSQL is the run's alone: another local user reaches it
neither over a Unix socket nor over TCP, and nothing of it is left in /tmp."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from memory_lab import load_dialogues
from memory_lab.memories.protocol import Query

from ..conftest import FIXTURES
from .replay import replayed

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("psql") and shutil.which("setpriv")),
    reason="connects as another local user (nobody): needs root, psql and setpriv",
)


def as_nobody(*command: str, **env: str) -> subprocess.CompletedProcess:
    """``command`` run by the unprivileged user ``nobody``."""
    return subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env", "-i",
         "PATH=/usr/bin:/bin", *(f"{k}={v}" for k, v in env.items()), *command],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip


def read_bank_as_nobody(host: str, port: int) -> subprocess.CompletedProcess:
    """``nobody`` reading the bank with psql over ``host`` (a socket's folder, or an address),
    with the credentials the memory used to have."""
    return as_nobody(
        "psql", "-X", "-w", "-h", host, "-p", str(port), "-U", "hindsight", "-d", "hindsight",
        "-tAc", "SELECT count(*) FROM memory_units",
        PGPASSWORD="hindsight", PGCONNECT_TIMEOUT="5",
    )  # fmt: skip


def test_no_other_local_user_reaches_a_cells_database_and_nothing_is_left_in_tmp(run_models):
    coffee = load_dialogues(FIXTURES / "memories" / "coffee-change.yaml")[0]
    before = set(os.listdir("/tmp"))
    # a results folder any user may go through, as far as the cell's own folder; short, so the
    # socket's path in it fits psql's 107 bytes
    results = Path(tempfile.mkdtemp(prefix="ml-", dir="/var/tmp"))
    results.chmod(0o755)
    try:
        cell = replayed("hindsight", coffee, dataclasses.replace(run_models, work_dir=str(results)))
        try:
            folder = next(results.glob("cells/*/hindsight"))
            log = (folder / "worker.log").read_text()
            port = int(re.search(r"PostgreSQL up on port (\d+)", log).group(1))
            assert as_nobody("ls", str(folder.parent)).returncode == 0  # as far as there
            for host in ("127.0.0.1", "localhost", "/tmp", str(folder / "run")):
                tried = read_bank_as_nobody(host, port)
                assert tried.returncode != 0, f"nobody read the bank through {host}: {tried}"
            # the server's socket is in the bank's folder, which only the run's user may enter
            assert (folder / "run" / f".s.PGSQL.{port}").is_socket()
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
            assert "Permission denied" in read_bank_as_nobody(str(folder / "run"), port).stderr
            # the database served the run throughout
            recall = cell.memory.recall(Query("Which coffee shop is my favourite?", "s2"))
            assert any("Ritual Roasters" in item.text for item in recall.items)
            assert cell.memory.worker.proc.poll() is None
        finally:
            cell.close()
        assert not folder.exists()
    finally:
        shutil.rmtree(results, ignore_errors=True)
    # pg0's temporary folders (.tmpXXXXXX, one with initdb's password file), PostgreSQL's
    # socket (.s.PGSQL.<port>) and its lock: all were in the cell's folder
    left = sorted(n for n in set(os.listdir("/tmp")) - before if n.startswith("."))
    assert left == []


def test_the_passwords_never_look_like_an_option_to_pg0():
    """pg0 takes its password on the command line: one beginning with '-' was read as an option
    and PostgreSQL did not start (a base64 password does, one time in 64)."""
    import importlib.util

    from memory_lab.memories.systems.hindsight import worker as hindsight_worker

    path = Path(hindsight_worker.__file__).with_name("db.py")
    spec = importlib.util.spec_from_file_location("hindsight_db_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # it imports pg0 only when a server is made
    drawn = [module.draw_password() for _ in range(2000)]
    assert all(re.fullmatch(r"[0-9a-f]{64}", p) for p in drawn)
    assert len(set(drawn)) == len(drawn)
