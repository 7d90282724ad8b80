"""The conformance check a memory must pass: ``memory-lab check SPEC...``, ``check_memory``.

A memory is replayed through small dialogues with the offline models, three times, and each
check below is named in what it reports (one line per failure):

- ``replays-repeat``: two replays of the same dialogue give the same records (timings aside):
  no unseeded randomness, no state kept between cells;
- ``recall-is-a-read``: a replay in which the memory is asked every probe's question after
  every exchange gives every later turn and probe the same prompt, reply and recalled turns
  (asking does not change what later turns see);
- ``evidence-names-real-turns``: the turns a memory reports it recalled are turns of the
  dialogue;
- ``close-releases``: a cell closed leaves no thread, child process, open file or temporary
  folder entry behind (compared after the second replay with after the first, so engines and
  pools loaded once for the process are not counted; the cells get a temporary folder of the
  check's own, ``TMPDIR``);
- ``offline``: nothing is looked up or connected to beyond loopback (Python's audit events
  ``socket.getaddrinfo`` and ``socket.connect``) and nothing new appears in HOME or its
  ``.cache``;
- ``parameters-refused``: each declared parameter refuses a value outside its range or choices
  in one line (``MemorySpecError``).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
import tempfile
import threading
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.records import without_timings
from memory_lab.memories.registry import MemorySpec, MemorySpecError, parse_memory_spec
from memory_lab.run.cell import open_cell, replayed
from memory_lab.run.context import RunModels
from memory_lab.run.exchanges import exchanges

CHECKS = (
    "replays-repeat",
    "recall-is-a-read",
    "evidence-names-real-turns",
    "close-releases",
    "offline",
    "parameters-refused",
)
# What a later turn or probe sees: compared by ``recall-is-a-read``
SEEN = ("prompt", "reply", "recalled_turns", "evidence_recall")


@dataclass
class CheckReport:
    """What ``check_memory`` found for one memory: the checks run and the failures."""

    spec: str
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def failed(self, check: str, detail: str) -> None:
        self.failures.append((check, detail))

    def lines(self) -> list[str]:
        """One line per failure, or one saying every check passed."""
        if self.ok:
            return [f"ok    {self.spec}: {', '.join(CHECKS)}"]
        return [f"FAIL  {self.spec}: {check}: {detail}" for check, detail in self.failures]


def check_memory(
    spec: MemorySpec | str, dialogues: list[Dialogue], models: RunModels | None = None
) -> CheckReport:
    """Run every check of ``CHECKS`` on ``spec`` over ``dialogues``.

    The offline models unless ``models`` is given; a report of the failures, each named by its
    check."""
    spec = parse_memory_spec(spec) if isinstance(spec, str) else spec
    models = models or RunModels.create()
    report = CheckReport(spec.label)
    _parameters_refused(spec, report)
    for dialogue in dialogues:
        with _watched(report):
            first = _replay(spec, dialogue, models, look=False)
            held = _held()
            second = _replay(spec, dialogue, models, look=False)
            _released(held, _held(), dialogue, report)
            looked = _replay(spec, dialogue, models, look=True)
        _repeat(first, second, dialogue, report)
        _read_only(first, looked, dialogue, report)
        _real_turns(first, dialogue, report)
    return report


def _replay(spec: MemorySpec, dialogue: Dialogue, models: RunModels, look: bool) -> list[dict]:
    """The dialogue's records through a fresh cell; ``look``: every probe's question asked of
    the memory after every exchange too (its cost taken away: looking is not charged)."""
    records: list[dict[str, Any]] = []
    where = {tid: ex.index for ex in exchanges(dialogue) for tid in ex.turn_ids}
    due: dict[int, list[Any]] = {}
    for probe in dialogue.probes:
        due.setdefault(where[probe.after], []).append(probe)
    with open_cell(spec, dialogue, models) as cell:
        for ex, made in replayed(cell):
            records += [r.to_dict() for r in made]
            records += [r.to_dict() for r in cell.ask_all(due.get(ex.index, []), ex)]
            if look:
                for probe in dialogue.probes:
                    cell.prompt_for(probe.question, ex)
                cell.maintenance()  # what looking cost is not charged (nor compared)
    return records


def _differs(a: list[dict], b: list[dict], fields: tuple[str, ...] | None) -> str | None:
    """Where two replays' records first differ, in words; None when they agree."""
    if len(a) != len(b):
        return f"{len(a)} records, then {len(b)}"
    for n, (x, y) in enumerate(zip(a, b, strict=True)):
        x, y = without_timings(x), without_timings(y)
        keys = [k for k in (fields or sorted(x.keys() | y.keys())) if x.get(k) != y.get(k)]
        if keys:
            where = x.get("turn_id") or x.get("probe_id") or x.get("type")
            return f"record {n + 1} ({where}): {keys[0]} {_apart(x.get(keys[0]), y.get(keys[0]))}"
    return None


def _apart(a: Any, b: Any, width: int = 30) -> str:
    """Two values that differ, in one short line: texts around where they first differ."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return f"{a!r} then {b!r}"
    at = next(
        (i for i, (p, q) in enumerate(zip(a, b, strict=False)) if p != q), min(len(a), len(b))
    )
    start = max(0, at - width)
    lead = "..." if start else ""
    return (
        f"at character {at}: {lead}{a[start : at + width]!r} then {lead}{b[start : at + width]!r}"
    )


def _repeat(first: list[dict], second: list[dict], dialogue: Dialogue, report: CheckReport) -> None:
    said = _differs(first, second, None)
    if said:
        report.failed("replays-repeat", f"{dialogue.id}: two replays differ at {said}")


def _read_only(
    first: list[dict], looked: list[dict], dialogue: Dialogue, report: CheckReport
) -> None:
    def seen(records: list[dict]) -> list[dict]:
        return [r for r in records if r["type"] in ("turn", "probe")]

    said = _differs(seen(first), seen(looked), SEEN)
    if said:
        report.failed("recall-is-a-read", f"{dialogue.id}: asking changed {said}")


def _real_turns(records: list[dict], dialogue: Dialogue, report: CheckReport) -> None:
    turns = {t.id for t in dialogue.turns}
    for record in records:
        named = [t for t in record.get("recalled_turns") or [] if t not in turns]
        if named:
            report.failed(
                "evidence-names-real-turns",
                f"{dialogue.id} probe {record.get('probe_id')}: recalled {named[0]!r}, "
                "no turn of the dialogue",
            )
            return


# ------------------------------------------------------------------------- what a cell holds


def _children() -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        found |= {int(p) for p in task.read_text().split()}
    return found


def _held() -> dict[str, set]:
    """Threads, child processes, open files and temporary folder entries of this process."""
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed while listed (the listing's own)
            pass
    return {
        "thread": {t.name for t in threading.enumerate() if t.is_alive()},
        "child process": _children() if sys.platform == "linux" else set(),
        "open file": {f for f in fds if f.startswith("/")},
        "temporary entry": set(os.listdir(tempfile.gettempdir())),
    }


def _released(
    before: dict[str, set], after: dict[str, set], dialogue: Dialogue, report: CheckReport
) -> None:
    for what, held in after.items():
        left = sorted(str(x) for x in held - before[what])
        if left:
            report.failed("close-releases", f"{dialogue.id}: a closed cell left {what} {left[0]}")


# ------------------------------------------------------------------------------ offline


_SEEN: list[str] | None = None  # what the audit hook saw while a check watched
_HOOKED = False
_HOOK_LOCK = threading.Lock()


def _loopback(host: Any) -> bool:
    """Whether a host a socket looks up or connects to is this machine's loopback."""
    if isinstance(host, bytes):
        host = host.decode("utf-8", "replace")
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _audit(event: str, args: tuple) -> None:
    seen = _SEEN
    if seen is None:
        return
    if event == "socket.getaddrinfo" and not _loopback(args[0]):
        seen.append(f"looked up {args[0]!r}")
    elif event == "socket.connect" and isinstance(args[1], tuple) and not _loopback(args[1][0]):
        seen.append(f"connected to {args[1][0]}:{args[1][1]}")


def _home_entries() -> set[str]:
    home = Path.home()
    found = set()
    for folder in (home, home / ".cache"):
        if folder.is_dir():
            found |= {str(folder / name) for name in os.listdir(folder)}
    return found


@contextmanager
def _watched(report: CheckReport) -> Iterator[None]:
    """Every lookup and connection beyond loopback the process makes (any thread), and HOME's
    new entries, as ``offline`` failures."""
    global _HOOKED, _SEEN
    with _HOOK_LOCK:
        if not _HOOKED:  # an audit hook stays for the process; it looks only when asked
            sys.addaudithook(_audit)
            _HOOKED = True
    home = _home_entries()
    _SEEN = []
    # a temporary folder of the check's own: what other processes put in /tmp is not the cell's
    private = tempfile.mkdtemp(prefix="memory-lab-check-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = private, private
    try:
        yield
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        shutil.rmtree(private, ignore_errors=True)
        seen, _SEEN = _SEEN, None
        for said in dict.fromkeys(seen):
            report.failed("offline", said)
        for entry in sorted(_home_entries() - home):
            report.failed("offline", f"wrote {entry} under HOME")


# ---------------------------------------------------------------------------- parameters


def _outside(param: Any) -> list[Any]:
    """Values a parameter must refuse: past its bounds, outside its choices."""
    if typing.get_origin(param.type) is Literal:
        return ["no-such-choice"]
    values: list[Any] = []
    if param.min is not None:
        values.append(param.min - 1)
    if param.max is not None:
        values.append(param.max + 1)
    return values


def _parameters_refused(spec: MemorySpec, report: CheckReport) -> None:
    name = spec.label.partition(":")[0]
    for param in spec.factory.params:
        for value in _outside(param):
            try:
                parse_memory_spec(f"{name}:{param.name}={value}")
            except MemorySpecError:
                continue
            report.failed("parameters-refused", f"{param.name}={value} was accepted")
