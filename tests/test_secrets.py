"""No secret in any file or message: each way a password, key or token reaches a run, planted.

Every test plants ``SECRET`` (or a variant) where a user would put it, runs through the CLI, and
greps every file of the results folder and of the call cache (``MEMORY_LAB_CACHE``, a private
folder per test) and everything printed. The provider is the loopback OpenAI mock, PostgreSQL a
private cluster (behind a loopback proxy that can cut it mid-run).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memory_lab.cli import main
from memory_lab.memories import register_memory, unregister_memory
from memory_lab.memories.base import TextMemory

from .conftest import FIXTURES
from .models.openai_mock import OpenAIMock

SECRET = "PLANTED-s3cr3t-XYZ"
DIALOGUES = str(FIXTURES / "dialogues")


def leaks(secret: str, *folders: Path, printed: str = "") -> list[str]:
    """Where ``secret`` (as written, or percent-encoded) shows: files under ``folders`` (every
    byte, SQLite files and their WAL included) and the printed text."""
    forms = {secret.encode(), secret.replace("-", "%2D").encode()}
    found = [
        str(path)
        for folder in folders
        for path in Path(folder).rglob("*")
        if path.is_file() and any(form in path.read_bytes() for form in forms)
    ]
    return found + (["printed output"] if secret in printed else [])


def cli(monkeypatch, *args: str) -> int:
    """``memory-lab ARGS`` in this process, with ``sys.argv`` as a shell would set it."""
    monkeypatch.setattr(sys, "argv", ["memory-lab", *args])
    return main(list(args))


@pytest.fixture
def cache_dir() -> Path:
    return Path(os.environ["MEMORY_LAB_CACHE"])


@pytest.fixture
def mock(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + SECRET + "-key")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIMock() as server:
        yield server


def with_credentials(url: str, user: str, password: str) -> str:
    return url.replace("http://", f"http://{user}:{password}@")


PROVIDER_RUN = [
    "run",
    "--memory",
    "summary",
    "vector:k=2",
    "--dialogues",
    DIALOGUES,
    "--llm",
    "openai:gpt-4o-mini",
    "--memory-llm",
    "openai:gpt-4o-mini",
    "--embeddings",
    "openai:text-embedding-3-small",
    "--judge",
    "openai:gpt-4o-mini",
    "--quiet",
]


def test_a_resource_password_is_not_in_argv_nor_anywhere(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    code = cli(
        monkeypatch,
        *["run", "--memory", "buffer", "--dialogues", DIALOGUES, "--out", str(out), "--quiet"],
        *["--resource", f"db=postgresql://alice:{SECRET}@db.example:5432/app"],
        *["--resource", f"kw=host=db.example password='{SECRET}-kw' dbname=app"],
        *["--resource", f"token={SECRET}-opaque"],
    )
    printed = "".join(capsys.readouterr())
    assert code == 0
    assert leaks(SECRET, out, printed=printed) == []
    info = json.loads((out / "run.json").read_text())
    assert "db=postgresql://***@db.example:5432/app" in info["argv"]
    assert "kw=host=db.example password=*** dbname=app" in info["argv"]
    assert info["resources"] == ["db", "kw", "token"]


@pytest.mark.parametrize("through", ["--resource", "MEMORY_LAB_POSTGRES"])
def test_a_keyword_dsn_is_not_echoed_by_the_preflight_error(tmp_path, monkeypatch, capsys, through):
    dsn = f"host=127.0.0.1 port=1 user=alice password={SECRET} dbname=memlab connect_timeout=2"
    args = ["run", "--memory", "thread:saver=postgres", "--out", str(tmp_path / "run"), "--quiet"]
    if through == "--resource":
        args += ["--resource", f"postgres={dsn}"]
    else:
        monkeypatch.setenv("MEMORY_LAB_POSTGRES", dsn)
    assert cli(monkeypatch, *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach PostgreSQL at 127.0.0.1:1/memlab" in err
    assert SECRET not in err and "alice" not in err and not (tmp_path / "run").exists()


def test_an_unparsable_dsn_is_shown_redacted(tmp_path, monkeypatch, capsys):
    dsn = f"host=127.0.0.1 port=1 password='{SECRET} dbname=memlab"  # the quote never closes
    args = ["run", "--memory", "thread:saver=postgres", "--out", str(tmp_path / "run"), "--quiet"]
    assert cli(monkeypatch, *args, "--resource", f"postgres={dsn}") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "password=***" in err and SECRET not in err


class CuttableProxy:
    """A loopback TCP proxy to a server that lets ``allow`` connections through, then dies
    (every open connection cut, no more accepted), as a server that goes away mid-run."""

    def __init__(self, host: str, port: int, allow: int):
        self.upstream = (host, port)
        self.allow = allow
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.allow <= 0:
                client.close()
                self.cut()
                return
            self.allow -= 1
            server = socket.create_connection(self.upstream)
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.listener.close()
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


def test_a_server_that_dies_mid_run_leaves_no_dsn_in_the_errors(
    tmp_path, monkeypatch, capsys, postgres_url
):
    server = urlsplit(postgres_url)
    # the run's preflight and first cell reach the server; then it is gone for the others
    proxy = CuttableProxy(server.hostname, server.port, allow=2)
    try:
        dsn = (
            f"host=127.0.0.1 port={proxy.port} user={server.username} dbname=postgres "
            f"password={SECRET} connect_timeout=2"
        )
        out = tmp_path / "run"
        dialogues = tmp_path / "dialogues"
        dialogues.mkdir()
        text = (FIXTURES / "dialogues" / "mini.yaml").read_text()
        for n in (1, 2, 3):
            (dialogues / f"d{n}.yaml").write_text(text.replace("id: mini", f"id: mini-{n}"))
        code = cli(
            monkeypatch,
            *["run", "--memory", "thread:saver=postgres", "--dialogues", str(dialogues)],
            *["--out", str(out), "--quiet", "--resource", f"postgres={dsn}"],
        )
    finally:
        proxy.cut()
    printed = "".join(capsys.readouterr())
    assert code == 1
    info = json.loads((out / "run.json").read_text())
    assert info["failed_cells"] == 2 and len(info["errors"]) == 2
    cells = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    failed = [r for r in cells if r["type"] == "cell" and r["status"] == "failed"]
    assert len(failed) == 2
    assert all(f"cannot reach PostgreSQL at 127.0.0.1:{proxy.port}/postgres" in r["error"]
               for r in failed)  # fmt: skip
    assert leaks(SECRET, out, printed=printed) == []


def test_a_base_url_with_credentials_is_in_no_file_and_the_cache_ignores_them(
    tmp_path, monkeypatch, capsys, mock, cache_dir
):
    first = with_credentials(mock.base_url, "bob", SECRET)
    assert cli(monkeypatch, *PROVIDER_RUN, "--out", str(tmp_path / "a"), "--base-url", first) == 0
    calls = len(mock.requests)
    other = with_credentials(mock.base_url, "bob", SECRET + "-2")
    assert cli(monkeypatch, *PROVIDER_RUN, "--out", str(tmp_path / "b"), "--base-url", other) == 0
    printed = "".join(capsys.readouterr())
    assert calls > 0 and len(mock.requests) == calls  # another password: every call a cache hit
    assert leaks(SECRET, tmp_path / "a", tmp_path / "b", cache_dir, printed=printed) == []
    assert leaks("bob", cache_dir) == []
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    redacted = mock.base_url.replace("http://", "http://***@")
    assert info["config"]["models"]["base_url"] == info["models"]["base_url"] == redacted


def test_a_run_whose_base_url_had_credentials_resumes_only_with_them_again(
    tmp_path, monkeypatch, capsys, mock
):
    url = with_credentials(mock.base_url, "bob", SECRET)
    out = str(tmp_path / "run")
    run = ["run", "--memory", "buffer", "--dialogues", DIALOGUES, "--llm", "openai:gpt-4o-mini"]
    assert cli(monkeypatch, *run, "--out", out, "--quiet", "--base-url", url) == 0
    capsys.readouterr()
    assert cli(monkeypatch, "run", "--resume", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass it again with --base-url URL" in err
    elsewhere = with_credentials("http://127.0.0.1:1/v1", "bob", SECRET)
    assert cli(monkeypatch, "run", "--resume", out, "--quiet", "--base-url", elsewhere) == 2
    err = capsys.readouterr().err
    assert "a resumed run keeps its provider" in err and SECRET not in err
    assert cli(monkeypatch, "run", "--resume", out, "--quiet", "--base-url", url) == 0
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert cli(monkeypatch, "run", "--resume", out, "--quiet") == 0
    printed = "".join(capsys.readouterr())
    assert leaks(SECRET, Path(out), printed=printed) == []
    info = json.loads((Path(out) / "run.json").read_text())
    assert info["status"] == "complete" and len(info["resumed"]) == 2


def test_a_base_url_with_credentials_from_the_environment_is_in_no_file(
    tmp_path, monkeypatch, capsys, mock, cache_dir
):
    monkeypatch.setenv("OPENAI_BASE_URL", with_credentials(mock.base_url, "bob", SECRET))
    assert cli(monkeypatch, *PROVIDER_RUN, "--out", str(tmp_path / "run")) == 0
    printed = "".join(capsys.readouterr())
    assert mock.requests and leaks(SECRET, tmp_path / "run", cache_dir, printed=printed) == []


@pytest.mark.parametrize("through", ["--base-url", "OPENAI_BASE_URL"])
def test_an_unreachable_provider_is_named_without_its_credentials(
    tmp_path, monkeypatch, capsys, through
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://bob:{SECRET}@127.0.0.1:{port}/v1"
    args = ["run", "--memory", "buffer", "--llm", "openai:gpt-4o-mini"]
    args += ["--out", str(tmp_path / "run"), "--quiet"]
    if through == "--base-url":
        args += ["--base-url", url]
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert cli(monkeypatch, *args) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the provider at http://***@127.0.0.1:{port}/v1" in err
    assert SECRET not in err and "bob" not in err


class Quoting(TextMemory):
    """Fails on its first exchange with an error quoting the run's secrets bare: the password
    of its ``db`` resource and the API key."""

    db: str = ""

    def context(self, query):
        return ""

    def remember(self, user, assistant):
        password = urlsplit(self.db).password
        key = os.environ["OPENAI_API_KEY"]
        raise RuntimeError(f"login refused for {password!r} (then tried {key})")


@pytest.fixture
def quoting():
    register_memory("quoting", "fails quoting the run's secrets")(
        lambda res: Quoting(db=res.resource("db"))
    )
    yield "quoting"
    unregister_memory("quoting")


def test_a_traceback_quoting_known_secrets_is_written_without_them(
    tmp_path, monkeypatch, capsys, quoting
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + SECRET + "-key")
    out = tmp_path / "run"
    code = cli(
        monkeypatch,
        *["run", "--memory", quoting, "buffer", "--dialogues", DIALOGUES, "--out", str(out)],
        *["--quiet", "--resource", f"db=postgresql://alice:{SECRET}-pw@db.example/app"],
    )
    printed = "".join(capsys.readouterr())
    assert code == 1
    info = json.loads((out / "run.json").read_text())
    (error,) = info["errors"]
    assert "login refused for '***' (then tried ***)" in error["traceback"]
    assert leaks(SECRET, out, printed=printed) == []
