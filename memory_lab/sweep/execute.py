"""Running a sweep: each run of the spec in its folder, resumed where one is, measured.

Each run is ``memory-lab run`` in a process of its own, measured by ``sampler.measure`` (wall,
CPU seconds, peak summed PSS and RSS of its whole tree, the sampler's own CPU). A folder that
holds a run (its ``run.json``) is resumed with ``--resume``: the run keeps its finished cells
and redoes the others, so a sweep killed at any moment (SIGKILL included: the run dies with it)
goes on where it stopped when started again, with no record twice; a run complete with every
cell done is kept and not started again. Each invocation is appended to ``OUT/sweep.json``
(written whole, then renamed over the old one) as ``stopped`` when it starts and replaced by
what it cost when it ends, so one the sweep's death cut short is counted, unmeasured; the
embedding floor of a run's texts is added once the run has finished (``measure: {floor:
true}``). What a run prints goes to ``OUT/logs/<key>.log``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memory_lab.errors import EXIT_CELL_FAILED, EXIT_OK, BadInput
from memory_lab.sweep.sampler import measure
from memory_lab.sweep.spec import Run, Sweep, option_args

LOG = "sweep.json"


def selected(sweep: Sweep, only: Iterable[str] | None, say: Callable[[str], None]) -> list[Run]:
    """The runs to do: ``only`` (keys) or all; a run a variable leaves unset is skipped with a
    line saying so, and is an error when named by ``only``."""
    if only:
        chosen = [sweep.run(k) for k in only]
        for r in chosen:
            if r.unset:
                raise BadInput(r.unset)
        return chosen
    for r in sweep.runs:
        if r.unset:
            say(f"{r.key}: left out: {r.unset.split(': ', 1)[1]}")
    return [r for r in sweep.runs if not r.unset]


def installed(run: Run, say: Callable[[str], None]) -> Run:
    """``run`` without the memories whose system is not installed here (each named with the
    command that installs it), as ``--memory all`` leaves them out."""
    from dataclasses import replace

    from memory_lab.memories.lookup import memory_factories
    from memory_lab.memories.specs import parse_memory_spec

    factories = memory_factories()
    kept = []
    for spec in run.memories:
        factory = factories.get(parse_memory_spec(spec).name) if spec != "all" else None
        system = factory.system if factory is not None else None
        if system is not None and system.missing():
            say(f"{run.key}: leaves out {spec}, not installed here: {system.install_command()}")
            continue
        kept.append(spec)
    if not kept:
        raise BadInput(f"{run.key}: none of its memories is installed here")
    return replace(run, memories=tuple(kept))


def complete(folder: Path) -> bool:
    """Whether ``folder`` holds a run that finished with every cell done."""
    try:
        recorded = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded.get("status") == "complete" and not recorded.get("failed_cells")


def command_of(run: Run, folder: Path) -> list[str]:
    """The ``memory-lab run`` command of ``run`` into ``folder``: a resume when it holds a run."""
    from memory_lab.log.resume_policy import RESUME_OPTIONS

    base = [sys.executable, "-m", "memory_lab.cli", "run", "--quiet"]
    if (folder / "run.json").is_file():
        allowed = {k: v for k, v in run.options.items() if k in RESUME_OPTIONS}
        return base + ["--resume", str(folder), *option_args(allowed)]
    return base + run.command(folder)


def read_log(out: Path) -> dict[str, Any]:
    """``OUT/sweep.json``: run key -> its invocations and floor; empty when there is none."""
    path = out / LOG
    if not path.is_file():
        return {"runs": {}}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: not a sweep log ({e}); move it away to start the log again") from e


def write_log(out: Path, log: dict[str, Any]) -> None:
    path = out / LOG
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(log, indent=1), encoding="utf-8")
    os.replace(temporary, path)


def _entry(log: dict[str, Any], sweep: Sweep, run: Run) -> dict[str, Any]:
    entry = log["runs"].setdefault(run.key, {"invocations": []})
    entry.update(
        title=run.title,
        dialogues=run.dialogues,
        memories=list(run.memories),
        options=dict(run.options),
    )
    log.update(name=sweep.name, title=sweep.title, spec=str(sweep.path))
    return entry


def run_one(
    sweep: Sweep, run: Run, out: Path, log: dict[str, Any], say: Callable[[str], None]
) -> int:
    """Run (or resume) ``run`` into ``OUT/<key>``, measured; its exit code. A run that is
    complete with no failed cell is kept as it is (nothing to redo)."""
    folder = out / run.key
    if complete(folder):
        say(f"{run.key}: complete in {folder}; kept")
        measure_floor(sweep, run, out, log, say)
        return EXIT_OK
    command = command_of(run if (folder / "run.json").is_file() else installed(run, say), folder)
    resumed = "--resume" in command
    say(f"{run.key}: {'resuming' if resumed else 'running'}: memory-lab {' '.join(command[3:])}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    entry = _entry(log, sweep, run)
    # written before it starts: an invocation the sweep's death cut short stays counted, unmeasured
    stopped = {"started": time.time(), "resumed": resumed, "stopped": True}
    entry["invocations"].append(stopped)
    write_log(out, log)
    (out / "logs").mkdir(exist_ok=True)
    with (out / "logs" / f"{run.key}.log").open("a", encoding="utf-8") as printed:
        printed.write(f"$ memory-lab {' '.join(command[3:])}\n")
        printed.flush()
        measured = measure(command, env=env, interval=sweep.measure.interval, stdout=printed)
    entry["invocations"][entry["invocations"].index(stopped)] = {
        **measured.as_dict(),
        "resumed": resumed,
    }
    write_log(out, log)
    say(
        f"{run.key}: exit {measured.exit_code}, {measured.wall:,.1f} s wall, {measured.cpu:,.1f} "
        f"CPU s, peak PSS {measured.peak_pss / 2**20:,.0f} MiB summed over "
        f"{measured.processes} process(es); sampler {100 * measured.sampler_share:.2f}% of a core"
    )
    if measured.exit_code == EXIT_OK:
        measure_floor(sweep, run, out, log, say)
    return measured.exit_code


def measure_floor(
    sweep: Sweep, run: Run, out: Path, log: dict[str, Any], say: Callable[[str], None]
) -> None:
    """The embedding floor of a finished run's texts, once (``measure: {floor: true}``)."""
    entry = _entry(log, sweep, run)
    if not sweep.measure.floor or "floor" in entry:
        return
    from memory_lab.sweep.floor import floor

    started = time.perf_counter()
    entry["floor"] = {
        kind: [texts, per]
        for kind, (texts, per) in floor(
            run.dialogues, run.memories, sample=sweep.measure.sample
        ).items()
    }
    write_log(out, log)
    say(f"{run.key}: embedding floor measured in {time.perf_counter() - started:,.0f} s")


def run_sweep(
    sweep: Sweep,
    out: Path | None = None,
    only: Iterable[str] | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Every selected run of ``sweep`` in turn; 0 when each ended well, else the first other
    exit code (a failed cell's 1 after the others: the sweep goes on past a run that fails)."""
    out = Path(out or sweep.out)
    out.mkdir(parents=True, exist_ok=True)
    log = read_log(out)
    codes = []
    runs = selected(sweep, only, say)
    for i, run in enumerate(runs, 1):
        say(f"[{i}/{len(runs)}] {run.title}")
        codes.append(run_one(sweep, run, out, log, say))
    failed = [c for c in codes if c != EXIT_OK]
    if not failed:
        return EXIT_OK
    return next((c for c in failed if c != EXIT_CELL_FAILED), EXIT_CELL_FAILED)
