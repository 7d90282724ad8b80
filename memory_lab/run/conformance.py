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
  in one line (``MemorySpecError``);
- ``survives-restart`` (a capability: only where the spec keeps its state on a server, as its
  registration declares, ``persistent``, and the resource it needs is given): a cell that holds
  the first half of the dialogue and is closed, then a new cell of the same id (as ``memory-lab
  serve`` makes after a restart) that replays the second half, show every later turn and probe
  what one uninterrupted replay shows;
- ``kill-resume`` (a capability: only where another process can import the memory by name, a
  built-in, an installed one or ``module:factory``): ``memory-lab run`` killed (SIGKILL) mid-cell
  and continued with ``--resume`` writes the same records as a run never killed, none lost and
  none twice (timings aside).

A capability a memory does not have is reported as skipped, with the reason, not as passed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import typing
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.records import without_timings
from memory_lab.memories.lg_backends import POSTGRES_RESOURCE
from memory_lab.memories.registry import (
    MemorySpec,
    MemorySpecError,
    parse_memory_spec,
)
from memory_lab.memories.registry import (
    is_builtin_module as _is_builtin,
)
from memory_lab.run.cell import open_cell, replayed
from memory_lab.run.context import RunModels
from memory_lab.run.exchanges import exchanges, session_ends

CHECKS = (
    "replays-repeat",
    "recall-is-a-read",
    "evidence-names-real-turns",
    "close-releases",
    "offline",
    "parameters-refused",
    "survives-restart",
    "kill-resume",
)
DEFAULT_DIALOGUES = "builtin:classic"  # its first dialogue, unless others are given
KILL_RESUME_TIMEOUT = 900.0  # seconds one ``memory-lab run`` of the check may take
# What a later turn or probe sees: compared by ``recall-is-a-read``
SEEN = ("prompt", "reply", "recalled_turns", "evidence_recall")


@dataclass
class CheckReport:
    """What ``check_memory`` found for one memory: the checks run and the failures."""

    spec: str
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # a capability it lacks: why

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def passed(self) -> list[str]:
        failed = {c for c, _ in self.failures}
        return [c for c in CHECKS if c not in failed and c not in self.skipped]

    def failed(self, check: str, detail: str) -> None:
        self.failures.append((check, detail))

    def lines(self) -> list[str]:
        """One line per failure, or one saying which checks passed (and which capabilities the
        memory lacks, skipped)."""
        if self.ok:
            skipped = "; ".join(f"{c} skipped: {why}" for c, why in self.skipped.items())
            line = f"ok    {self.spec}: {', '.join(self.passed)}"
            return [line + (f" ({skipped})" if skipped else "")]
        return [f"FAIL  {self.spec}: {check}: {detail}" for check, detail in self.failures]


def check_memory(
    spec: MemorySpec | str,
    dialogues: list[Dialogue],
    models: RunModels | None = None,
    resources: dict[str, str] | None = None,
) -> CheckReport:
    """Run every check of ``CHECKS`` on ``spec`` over ``dialogues``.

    The offline models unless ``models`` is given (built with ``resources``, e.g. ``postgres``,
    when not); a report of the failures, each named by its check, and of the capabilities the
    memory lacks, skipped."""
    spec = parse_memory_spec(spec) if isinstance(spec, str) else spec
    models = models or RunModels.create(resources=resources)
    report = CheckReport(spec.label)
    _parameters_refused(spec, report)
    restart = _restart_applies(spec, models)
    if restart is not None:
        report.skipped["survives-restart"] = restart
    named = _named_elsewhere(spec)
    if named is not None:
        report.skipped["kill-resume"] = named
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
        if restart is None:
            _survives_restart(spec, dialogue, models, first, report)
        if named is None:
            _kill_and_resume(spec, dialogue, models, first, report)
    return report


def assert_conforms(
    spec: MemorySpec | str,
    dialogues: list[Dialogue] | None = None,
    models: RunModels | None = None,
    resources: dict[str, str] | None = None,
) -> CheckReport:
    """The pytest helper: ``check_memory`` over ``dialogues`` (default: the first of
    ``builtin:classic``, as ``memory-lab check``), AssertionError listing every failure; the
    report when every check passed (``report.skipped``: the capabilities it lacks)."""
    if dialogues is None:
        from memory_lab.dialogue.sources import load_dialogues

        dialogues = load_dialogues(DEFAULT_DIALOGUES)[:1]
    report = check_memory(spec, dialogues, models, resources)
    if not report.ok:
        raise AssertionError("\n".join(report.lines()))
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


# ------------------------------------------------------------------------- a server's state


def _restart_applies(spec: MemorySpec, models: RunModels) -> str | None:
    """None when ``survives-restart`` applies to the spec, else why not."""
    factory = spec.factory
    if not factory.keeps_state(spec.params):
        return "it keeps no state on a server (no persistent parameters given)"
    if POSTGRES_RESOURCE not in (models.resources or {}):
        return f"no --resource {POSTGRES_RESOURCE}=URL given"
    return None


def _survives_restart(
    spec: MemorySpec, dialogue: Dialogue, models: RunModels, reference: list[dict],
    report: CheckReport,
) -> None:  # fmt: skip
    """The first half in one cell, closed keeping its state; the second half in a new cell of
    the same id: what the second half sees against ``reference`` (one uninterrupted replay)."""
    exs = exchanges(dialogue)
    ends = session_ends(dialogue, exs)
    mid = len(exs) // 2
    due: dict[int, list[Any]] = {}
    where = {tid: ex.index for ex in exs for tid in ex.turn_ids}
    for probe in dialogue.probes:
        due.setdefault(where[probe.after], []).append(probe)
    kept = replace(spec, params={**spec.params, "keep": True}) if _has(spec, "keep") else spec
    cell_id = f"check-restart-{uuid.uuid4().hex[:12]}"
    later: list[dict] = []
    for part, half in ((kept, range(mid)), (spec, range(mid, len(exs)))):
        with open_cell(part, dialogue, models, cell_id) as cell:
            for i in half:
                made = cell.replay_exchange(exs[i], ends[i])
                asked = cell.ask_all(due.get(exs[i].index, []), exs[i])
                if part is spec:
                    later += [r.to_dict() for r in (*made, *asked)]
    keys = {_key(r) for r in later}
    expected = [r for r in reference if _key(r) in keys and r["type"] in ("turn", "probe")]
    said = _differs(expected, [r for r in later if r["type"] in ("turn", "probe")], SEEN)
    if said:
        report.failed(
            "survives-restart", f"{dialogue.id}: after a restart at exchange {mid}, {said}"
        )


def _has(spec: MemorySpec, name: str) -> bool:
    return any(p.name == name for p in spec.factory.params)


def _key(record: dict) -> tuple:
    return (record["type"], record.get("turn_id") or record.get("probe_id"), record.get("role"))


# ----------------------------------------------------------------------------- kill and resume


def _named_elsewhere(spec: MemorySpec) -> str | None:
    """None when another process can import the memory by its name, else why not."""
    if spec.factory.source is None and not _is_builtin(spec.factory.build.__module__):
        return "registered in this process only (name it as module:factory)"
    return None


def _kill_and_resume(
    spec: MemorySpec, dialogue: Dialogue, models: RunModels, first: list[dict],
    report: CheckReport,
) -> None:  # fmt: skip
    """``memory-lab run`` of the dialogue in processes of their own: one never killed and,
    beside it, one killed (SIGKILL, its process group) at the record half-way through the cell
    (by the in-process replay ``first``), then continued with ``--resume``. The continued run's
    records against the first's."""
    with tempfile.TemporaryDirectory(prefix="memory-lab-check-") as tmp:
        root = Path(tmp)
        argv = [
            sys.executable, "-c", "from memory_lab.cli import command; command()", "run",
            "--memory", _named(spec), "--dialogues", dialogue.source, "--jobs", "1",
            "--quiet",
        ]  # fmt: skip
        res = models.resources
        half = max(1, sum(r["type"] in ("turn", "probe") for r in first) // 2)
        whole, killed = _run_together(
            (argv + ["--out", str(root / "whole")], root / "cache-whole", res, None),
            (argv + ["--out", str(root / "killed")], root / "cache-killed", res,
             {"MEMORY_LAB_FAULT": f"record:{half}"}),
        )  # fmt: skip
        if whole.returncode != 0:
            report.failed("kill-resume", f"{dialogue.id}: the run failed: {_tail(whole)}")
            return
        if killed.returncode != -signal.SIGKILL:
            report.failed(
                "kill-resume", f"{dialogue.id}: the run was not killed at record {half} "
                f"(exit {killed.returncode}): {_tail(killed)}",
            )  # fmt: skip
            return
        resumed = _run(
            [*argv[:4], "--resume", str(root / "killed"), "--quiet"], root / "cache-killed", res
        )
        if resumed.returncode != 0:
            report.failed("kill-resume", f"{dialogue.id}: --resume failed: {_tail(resumed)}")
            return
        reference = _records(root / "whole", dialogue.id)
        said = _differs(reference, _records(root / "killed", dialogue.id), None)
        if said:
            report.failed("kill-resume", f"{dialogue.id}: killed and resumed, {said}")


def _named(spec: MemorySpec) -> str:
    """The spec as another process names it: ``module:factory[:params]`` for a memory from a
    module, else its label."""
    source = spec.source or spec.factory.source
    if not source:
        return spec.label
    params = spec.label.partition(":")[2]
    return f"{source}:{params}" if params else source


def _environment(cache: Path, resources: Any, env: dict[str, str] | None) -> dict[str, str]:
    """The check's resources as ``MEMORY_LAB_NAME`` (never on a command line, where ``ps``
    would show a password), the run's own cache folder, ``env``."""
    given = {f"MEMORY_LAB_{name.upper()}": value for name, value in (resources or {}).items()}
    return {**os.environ, **given, "MEMORY_LAB_CACHE": str(cache), **(env or {})}


def _run(argv: list[str], cache: Path, resources: Any, env: dict[str, str] | None = None) -> Any:
    """``argv`` in a session of its own; its completed process."""
    return subprocess.run(
        argv, capture_output=True, text=True, env=_environment(cache, resources, env),
        start_new_session=True, timeout=KILL_RESUME_TIMEOUT,
    )  # fmt: skip


def _run_together(*runs: tuple) -> list[Any]:
    """``_run`` of each ``(argv, cache, resources, env)`` at once; their completed processes."""
    started = [
        (argv, subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_environment(cache, resources, env), start_new_session=True,
        ))
        for argv, cache, resources, env in runs
    ]  # fmt: skip
    done = []
    for argv, process in started:
        try:
            out, err = process.communicate(timeout=KILL_RESUME_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        done.append(subprocess.CompletedProcess(argv, process.returncode, out, err))
    return done


def _records(folder: Path, dialogue_id: str) -> list[dict]:
    out = []
    for line in (folder / "records.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        if record.get("dialogue") == dialogue_id:
            out.append(without_timings(record))
    return out


def _tail(done: Any) -> str:
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return lines[-1] if lines else "no output"
