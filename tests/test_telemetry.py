"""Nothing leaves the machine: every bundled engine and every registered memory, run offline in
processes of their own under strace (which sees native code's sockets too, as onnxruntime's
telemetry opens them), make no DNS query, connect nowhere beyond loopback and write nothing
under HOME, with the telemetry opt-outs absent from the environment they start with."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.telemetry import active

from .thirdparty import installed_memories

FIXTURES = Path(__file__).parent / "fixtures"
STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="no strace: apt-get install strace")
# connect/sendto/sendmsg with an address: (family, address, port)
_INET = re.compile(
    r"sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\(\"([^\"]+)\"\)"
)
_INET6 = re.compile(
    r"sa_family=AF_INET6, sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, \"([^\"]+)\""
)


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1")


def traffic(trace: str) -> tuple[list[str], list[str]]:
    """(DNS queries, connections beyond loopback) in an strace log of connect/sendto/sendmsg.

    A DNS query is anything sent to port 53, loopback included (a local resolver forwards it).
    """
    dns, remote = [], []
    for line in trace.splitlines():
        for port, address in _INET.findall(line) + _INET6.findall(line):
            if port == "53":
                dns.append(line)
            elif not _loopback(address):
                remote.append(line)
    return dns, remote


def traced(argv: list[str], tmp_path: Path, timeout: float) -> tuple[list[str], list[str], list]:
    """``argv`` under ``strace -f`` with HOME an empty folder and no telemetry opt-out in its
    environment: (DNS queries, connections beyond loopback, files under HOME)."""
    home, log = tmp_path / "home", tmp_path / "strace.log"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in active()}
    env.update(HOME=str(home), MEMORY_LAB_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    command = [STRACE, "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect,sendto,sendmsg"]
    done = subprocess.run(
        [*command, "-o", str(log), *argv], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    dns, remote = traffic(log.read_text(errors="replace"))
    return dns, remote, sorted(p for p in home.rglob("*"))


def test_the_trace_reader_sees_a_dns_query_and_a_remote_connection():
    """The reader below is what the two audits rest on: it must see what they look for."""
    trace = (
        "7 connect(5, {sa_family=AF_INET, sin_port=htons(53), "
        'sin_addr=inet_addr("10.0.0.2")}, 16) = 0\n'
        "7 connect(6, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "2603:1030::5", &sin6_addr), sin6_scope_id=0}, 28) = -1\n'
        "7 connect(7, {sa_family=AF_INET, sin_port=htons(5432), "
        'sin_addr=inet_addr("127.0.0.1")}, 16) = 0\n'
        '7 sendto(9, "\\1", 1, 0, {sa_family=AF_INET, sin_port=htons(53), '
        'sin_addr=inet_addr("127.0.0.53")}, 16) = 1\n'
    )
    dns, remote = traffic(trace)
    assert len(dns) == 2 and len(remote) == 1 and "2603:1030::5" in remote[0]


def test_importing_memory_lab_switches_every_library_s_telemetry_off():
    OFF = active()  # the libraries' opt-outs and every system's declared ones
    assert {"MEM0_TELEMETRY", "TELEMETRY_DISABLED", "ORT_DISABLE_TELEMETRY"} <= set(OFF)
    env = {**os.environ, **{name: "1" if name != "ORT_DISABLE_TELEMETRY" else "0" for name in OFF}}
    code = "import os, memory_lab, json; print(json.dumps({k: os.environ.get(k) for k in %r}))"
    done = subprocess.run(
        [sys.executable, "-c", code % sorted(OFF)], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert done.stdout.strip() == __import__("json").dumps({k: OFF[k] for k in sorted(OFF)})


@needs_strace
def test_every_bundled_engine_sends_nothing_and_writes_nothing_under_home(tmp_path):
    code = (
        "import memory_lab\n"
        "from memory_lab.models.embeddings import EMBEDDING_MODELS, OfflineEmbeddings\n"
        "for key in EMBEDDING_MODELS:\n"
        "    assert len(OfflineEmbeddings(model=key).embed_query('Where do I live?')) > 0\n"
    )
    dns, remote, written = traced([sys.executable, "-c", code], tmp_path, timeout=300)
    assert (dns, remote, written) == ([], [], [])


@needs_strace
def test_an_offline_run_of_every_memory_sends_nothing_and_writes_nothing_under_home(tmp_path):
    from memory_lab import memory_factories

    names = installed_memories(sorted(  # the built-in ones installed here: not one another
        name                            # test registered as module:factory
        for name, f in memory_factories().items()
        if f.build.__module__.startswith("memory_lab")
    ))  # fmt: skip
    assert {"vector", "mem0", "graphiti", "hindsight", "cognee"} <= set(names)
    argv = [
        str(Path(sys.executable).with_name("memory-lab")), "run", "--memory", *names, "--jobs", "2",
        "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--out", str(tmp_path / "run"),
    ]  # fmt: skip
    dns, remote, written = traced(argv, tmp_path, timeout=600)
    assert (dns, remote, written) == ([], [], [])


def test_onnxruntime_imported_first_is_said_in_one_warning():
    """onnxruntime reads its switch when it loads: imported before memory_lab it has written
    its device id, and its uploader may still resolve Microsoft's collector (seen under strace
    in two of six runs): memory_lab switches its events off and says what it cannot undo."""
    env = {k: v for k, v in os.environ.items() if k not in active()}
    code = "import onnxruntime, memory_lab"
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert "RuntimeWarning: onnxruntime was imported before memory_lab" in done.stderr
    assert "ORT_DISABLE_TELEMETRY=1" in done.stderr
    after = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import memory_lab, onnxruntime"], env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "RuntimeWarning" not in after.stderr


@needs_strace
def test_mem0_and_chromadb_imported_first_send_nothing(tmp_path):
    """A notebook that imported mem0 and chromadb before memory_lab: their clients had read
    their switches on (mem0's PostHog client is made at import), and are switched off on the
    loaded modules; the run sends nothing. What mem0's import itself wrote under HOME (its
    config.json) is all there is there: nothing of the run's, matplotlib's cache included."""
    mini, run = str(FIXTURES / "dialogues" / "mini.yaml"), str(tmp_path / "run")
    code = (
        "import mem0, chromadb\n"
        "import memory_lab\n"
        "from memory_lab.cli import main\n"
        f"main(['run', '--memory', 'mem0', 'vector', '--dialogues', {mini!r},\n"
        f"      '--out', {run!r}, '--quiet'])\n"
        f"main(['report', {run!r}])\n"
    )
    dns, remote, written = traced([sys.executable, "-c", code], tmp_path, timeout=600)
    home = tmp_path / "home"
    assert (dns, remote) == ([], [])
    # mem0's own import may write its config.json (where MEM0_DIR does not point elsewhere)
    files = {p.relative_to(home).as_posix() for p in written if p.is_file()}
    assert files <= {".mem0/config.json"}, files
