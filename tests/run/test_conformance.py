"""``memory-lab check``: every built-in memory passes; a memory that breaks the contract fails
with the check named (one that writes in recall, draws unseeded random numbers, looks up a host,
leaves a thread and a file open, keeps its state outside its cell, loses its state across a
restart); a capability a memory lacks is said skipped, with the reason."""

from __future__ import annotations

import random
import socket
import sys
import tempfile
import textwrap
import threading

import pytest

from memory_lab import load_dialogues
from memory_lab.cli import main
from memory_lab.memories import (
    Item,
    MemoryResources,
    Query,
    Recall,
    register_memory,
    unregister_memory,
)
from memory_lab.memories.discover import builtin_systems
from memory_lab.memories.registry import memory_factories
from memory_lab.run.conformance import CHECKS, check_memory
from memory_lab.run.context import RunModels

from ..conftest import FIXTURES
from ..thirdparty import WHEELS, require

MINI = FIXTURES / "dialogues" / "mini.yaml"


class Remembering:
    """Keeps every user line; recall shows them all (a well-behaved memory), naming its turns."""

    def __init__(self, res: MemoryResources):
        self.lines: list[tuple[str, str | None]] = []

    def observe(self, exchange) -> None:
        self.lines.append((exchange.user, exchange.user_turn_id))

    def end_session(self, session) -> None: ...

    def recall(self, query: Query) -> Recall:
        return Recall(tuple(Item(t, (i,) if i else ()) for t, i in self.lines))

    def snapshot(self) -> dict:
        return {"lines": len(self.lines)}

    def close(self) -> None: ...


class WritesInRecall(Remembering):
    def recall(self, query: Query) -> Recall:
        self.lines.append((query.text, None))  # asking changes what later turns see
        return super().recall(query)


class Unseeded(Remembering):
    def recall(self, query: Query) -> Recall:
        items = list(super().recall(query).items)
        random.SystemRandom().shuffle(items)
        return Recall(tuple(items))


class LooksUp(Remembering):
    def observe(self, exchange) -> None:
        try:
            socket.getaddrinfo("telemetry.example.com", 443)
        except OSError:  # no network here: the look-up is what counts
            pass
        super().observe(exchange)


class Leaves(Remembering):
    def __init__(self, res: MemoryResources):
        super().__init__(res)
        self.stop = threading.Event()
        threading.Thread(target=self.stop.wait, name=f"left-{id(self)}", daemon=True).start()
        self.file = tempfile.NamedTemporaryFile(prefix="memory-left-", delete=False)  # noqa: SIM115

    def close(self) -> None: ...  # neither stopped nor closed


class Inventing(Remembering):
    def recall(self, query: Query) -> Recall:
        return Recall((Item("made up", ("s9.t99",)),))


BAD = {
    "writes_in_recall": (WritesInRecall, {"recall-is-a-read"}),
    # a random order differs between any two replays, the one that asks more included
    "unseeded": (Unseeded, {"replays-repeat", "recall-is-a-read"}),
    "looks_up": (LooksUp, {"offline"}),
    "leaves_open": (Leaves, {"close-releases"}),
    "invents_turns": (Inventing, {"evidence-names-real-turns"}),
}


@pytest.fixture(scope="module")
def mini():
    return load_dialogues(MINI)


@pytest.fixture
def registered():
    names = []

    def register(name, cls):
        register_memory(name, f"conformance test: {name}")(lambda res: cls(res))
        names.append(name)
        return name

    yield register
    for name in names:
        unregister_memory(name)


def test_a_memory_that_keeps_the_contract_passes(mini, run_models, registered):
    report = check_memory(registered("remembering", Remembering), mini, run_models)
    assert report.ok, report.lines()
    checked = [c for c in CHECKS if c not in ("survives-restart", "kill-resume")]
    assert report.lines() == [
        f"ok    remembering: {', '.join(checked)} (survives-restart skipped: it keeps no state "
        "on a server (no persistent parameters given); kill-resume skipped: registered in this "
        "process only (name it as module:factory))"
    ]


@pytest.mark.parametrize("name", list(BAD))
def test_a_memory_that_breaks_the_contract_fails_with_the_check_named(
    name, mini, run_models, registered
):
    cls, checks = BAD[name]
    report = check_memory(registered(name, cls), mini, run_models)
    assert not report.ok
    assert {c for c, _ in report.failures} == checks, report.lines()
    assert all(line.startswith(f"FAIL  {name}: ") for line in report.lines())


def _installed_here(name: str) -> bool:
    """A built-in memory whose system this machine holds (its extra or its environment)."""
    system = memory_factories()[name].system
    if system is None:
        return True
    if system.environment is not None:
        return system.environment.default_python().exists()
    return system.missing() is None


BUILT_IN = [
    n for n, f in memory_factories().items()
    if f.source is None and (f.system is None or f.system in builtin_systems())
]  # fmt: skip


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_memory_passes(name, mini, run_models):
    """The one conformance test of every memory memory-lab ships (the per-adapter repeats of
    replays, parameter bounds and offline runs are these checks)."""
    if name in WHEELS:  # a package no index carries: from the third-party folder
        require(*WHEELS[name], memory_factories()[name].system.install_command())
    if not _installed_here(name):
        system = memory_factories()[name].system
        pytest.skip(f"{name}'s system is not installed here: {system.install_command()}")
    report = check_memory(name, mini, run_models)
    assert report.ok, report.lines()
    assert "kill-resume" in report.passed


# A memory that keeps its notes in a file outside its cell, by dialogue: a rerun, or a resumed
# run after a kill, finds the notes of the run before
OUTSIDE = textwrap.dedent(
    """
    import json, os
    from pathlib import Path
    from memory_lab.memories import Item, Recall, register_memory

    class Outside:
        def __init__(self, path):
            self.path = path

        def observe(self, exchange):
            with open(self.path, "a") as f:
                f.write(json.dumps([exchange.user, exchange.user_turn_id]) + "\\n")

        def end_session(self, session): ...

        def recall(self, query):
            lines = [json.loads(l) for l in open(self.path)] if os.path.exists(self.path) else []
            return Recall(tuple(Item(t, (i,) if i else ()) for t, i in lines))

        def snapshot(self):
            return {}

        def close(self): ...

    @register_memory("outside", "notes in a file outside the cell")
    def outside(res, folder: str = %r):
        return Outside(str(Path(folder) / "notes.jsonl"))
    """
)


def test_a_memory_that_keeps_its_state_outside_its_cell_fails_kill_resume(
    mini, run_models, tmp_path, monkeypatch
):
    (tmp_path / "outside_memory.py").write_text(OUTSIDE % str(tmp_path), "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    try:
        report = check_memory("outside_memory:outside", mini, run_models)
    finally:
        unregister_memory("outside")
        sys.modules.pop("outside_memory", None)
    failed = {c for c, _ in report.failures}
    assert {"kill-resume", "replays-repeat"} <= failed, report.lines()
    [(_, detail)] = [f for f in report.failures if f[0] == "kill-resume"]
    assert detail.startswith("mini-profile: killed and resumed, ")


class Forgetful(Remembering):
    """Declares it keeps its state on a server, and keeps it in the process."""


def test_a_memory_that_loses_its_state_across_a_restart_fails_survives_restart(mini, registered):
    def forgetful(res: MemoryResources, saver: str = "memory") -> Forgetful:
        return Forgetful(res)

    register_memory("forgetful", "claims a server", persistent={"saver": ("postgres",)})(forgetful)
    try:
        models = RunModels.create(resources={"postgres": "postgresql://127.0.0.1:9/unused"})
        report = check_memory("forgetful:saver=postgres", mini, models)
    finally:
        unregister_memory("forgetful")
    [(check, detail)] = report.failures
    assert check == "survives-restart", report.lines()
    assert detail.startswith("mini-profile: after a restart at exchange ")


def test_a_thread_on_postgres_survives_a_restart(mini, postgres_url):
    models = RunModels.create(resources={"postgres": postgres_url})
    report = check_memory("thread:saver=postgres", mini, models)
    assert report.ok, report.lines()
    assert "survives-restart" in report.passed and not report.skipped


def test_the_command_says_one_line_a_memory_and_exits_1_on_a_failure(registered, capsys):
    registered("unseeded", Unseeded)
    assert main(["check", "buffer", "unseeded", "--dialogues", str(MINI)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("ok    buffer: ")
    assert out[1].startswith("FAIL  unseeded: replays-repeat: mini-profile: two replays differ")
    assert main(["check", "buffer", "--dialogues", str(MINI)]) == 0
