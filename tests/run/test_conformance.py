"""``memory-lab check``: the built-in memories pass; a memory that breaks the contract fails with
the check named (one that writes in recall, draws unseeded random numbers, looks up a host,
leaves a thread and a file open)."""

from __future__ import annotations

import random
import socket
import tempfile
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
from memory_lab.run.conformance import CHECKS, check_memory

from ..conftest import FIXTURES

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
    assert report.lines() == [f"ok    remembering: {', '.join(CHECKS)}"]


@pytest.mark.parametrize("name", list(BAD))
def test_a_memory_that_breaks_the_contract_fails_with_the_check_named(
    name, mini, run_models, registered
):
    cls, checks = BAD[name]
    report = check_memory(registered(name, cls), mini, run_models)
    assert not report.ok
    assert {c for c, _ in report.failures} == checks, report.lines()
    assert all(line.startswith(f"FAIL  {name}: ") for line in report.lines())


@pytest.mark.parametrize("spec", ["buffer", "window:k=2", "summary", "vector", "hybrid"])
def test_built_in_memories_pass(spec, mini, run_models):
    report = check_memory(spec, mini, run_models)
    assert report.ok, report.lines()


def test_the_command_says_one_line_a_memory_and_exits_1_on_a_failure(registered, capsys):
    registered("unseeded", Unseeded)
    assert main(["check", "buffer", "unseeded", "--dialogues", str(MINI)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("ok    buffer: ")
    assert out[1].startswith("FAIL  unseeded: replays-repeat: mini-profile: two replays differ")
    assert main(["check", "buffer", "--dialogues", str(MINI)]) == 0
