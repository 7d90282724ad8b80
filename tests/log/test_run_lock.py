"""One run per results folder: the folder lock, the configuration checksum, --resume's options.

The lock is held by real processes: a child that takes it through ``hold_folder`` and sleeps,
or a real run of the command line held mid-cell by ``MEMORY_LAB_FAULT=record:N:hang``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab import load_dialogues, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.run_guard import CHECKSUM_KEY, LOCK_FILE, FolderInUse, hold_folder
from memory_lab.results.read import RECORDS_FILE

from ..conftest import FIXTURES
from ..fault_runs import group_members, records_of, wait_for_empty_group
from ..processes import CLI, session_processes, wait_until

MEMORIES = ["buffer", "window:k=1"]
SOURCE = str(FIXTURES / "dialogues" / "mini.yaml")
HOLD = """\
import sys, time
from memory_lab.log.run_guard import hold_folder
with hold_folder(sys.argv[1]):
    print("held", flush=True)
    time.sleep(300)
"""


def run_argv(out: Path, *extra: str) -> list[str]:
    return ["run", "--memory", *MEMORIES, "--dialogues", SOURCE, "--out", str(out), "--quiet"] + [
        *extra
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of ``MEMORIES`` over mini.yaml."""
    out = tmp_path_factory.mktemp("lock") / "reference"
    run_benchmark(
        resolve_memories(MEMORIES), load_dialogues(SOURCE), out, sources=[SOURCE], progress=False
    )
    return out


@pytest.fixture
def interrupted(reference, tmp_path):
    """A copy of the reference cut after its first cell, as a run killed mid-way leaves it."""
    out = tmp_path / "interrupted"
    shutil.copytree(reference, out)
    lines = (out / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True)
    first = next(i for i, x in enumerate(lines) if '"type": "cell"' in x)
    (out / RECORDS_FILE).write_text("".join(lines[: first + 1]), "utf-8")
    edit_run_json(out, lambda info: info.update(status="interrupted"))
    return out


def edit_run_json(out: Path, change) -> None:
    info = json.loads((out / "run.json").read_text("utf-8"))
    change(info)
    (out / "run.json").write_text(json.dumps(info, indent=2), "utf-8")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a results folder but the lock (which names its last holder)."""
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != LOCK_FILE]
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


@pytest.fixture
def processes():
    """Start real processes (each in a session of its own); none outlives the test."""
    with session_processes() as start:
        yield start


@pytest.fixture
def holder(processes):
    """A child process holding a folder's lock through ``hold_folder`` until it is killed."""

    def hold(folder: Path) -> subprocess.Popen:
        proc = processes([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == "held\n"
        return proc

    return hold


def kill_9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert wait_for_empty_group(proc.pid, 5) == []


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("memory-lab: error: "), err
    assert "Traceback" not in err
    return err


def test_a_second_run_on_a_folder_in_use_is_refused_and_works_after_kill_9_of_the_holder(
    tmp_path, holder, capsys, reference
):
    out = tmp_path / "run"
    out.mkdir()
    proc = holder(out)
    assert main(run_argv(out)) == 2
    err = one_line_error(capsys)
    assert str(out) in err and f"pid {proc.pid} on " in err and "another run" in err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written
    kill_9(proc)  # the OS releases a dead holder's lock: never a stale one
    assert main(run_argv(out)) == 0
    assert records_of(out) == records_of(reference)


def test_resume_of_a_live_run_is_refused_and_leaves_it_running_untouched(
    tmp_path, processes, capsys, reference
):
    out = tmp_path / "run"
    cli = [*CLI, *run_argv(out)]
    proc = processes(cli, env={"MEMORY_LAB_FAULT": "record:3:hang"}, stderr=subprocess.PIPE)
    # the first cell is under way, then stalls
    wait_until(lambda: list(out.glob("parts/*.partial")), proc)
    before = snapshot(out)
    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    err = one_line_error(capsys)
    assert str(out) in err and f"pid {proc.pid} on " in err
    assert main(run_argv(out)) == 2  # nor a new run into it
    assert f"pid {proc.pid} on " in one_line_error(capsys)
    assert snapshot(out) == before and proc.poll() is None  # its parts, records, run.json kept
    kill_9(proc)
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert records_of(out) == records_of(reference)


@pytest.mark.slow
def test_jobs_workers_do_not_hold_the_lock_and_a_resume_after_kill_9_works(
    tmp_path, processes, capsys, reference
):
    out = tmp_path / "run"
    cli = [*CLI, *run_argv(out, "--jobs", "2")]
    proc = processes(cli, env={"MEMORY_LAB_FAULT": "record:3:hang"}, stderr=subprocess.PIPE)
    # both workers mid-cell, stalled
    wait_until(lambda: len(list(out.glob("parts/*.partial"))) >= 2, proc, 180)
    lock = (out / LOCK_FILE).resolve()

    def holds_lock(pid: int) -> bool:
        fds = Path(f"/proc/{pid}/fd")
        return any(os.path.realpath(fd) == str(lock) for fd in fds.iterdir())

    workers = [int(m.split()[0]) for m in group_members(proc.pid)]
    workers.remove(proc.pid)
    assert len(workers) >= 2
    assert holds_lock(proc.pid) and not any(map(holds_lock, workers))
    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    assert f"pid {proc.pid} on " in one_line_error(capsys)
    kill_9(proc)  # driver and workers: nothing keeps the lock
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert records_of(out) == records_of(reference)


def test_the_lock_is_released_after_a_normal_end_and_after_an_exception(
    tmp_path, holder, reference, monkeypatch
):
    with hold_folder(reference):  # the reference run ended: free, in this process
        with pytest.raises(FolderInUse):  # and a second holder, even in this process, is not
            with hold_folder(reference):
                pass
    holder(reference).kill()  # and free for another process

    import memory_lab.run.execute as execute

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(execute, "choose_executor", broken)  # once run.json is written
        with pytest.raises(RuntimeError, match="boom"):
            run_benchmark(
                resolve_memories(MEMORIES),
                load_dialogues(SOURCE),
                out,
                sources=[SOURCE],
                progress=False,
            )
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert records_of(out) == records_of(reference)


def test_reading_a_live_runs_folder_needs_no_lock(reference, tmp_path, holder):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    holder(out)
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").exists()


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("memory_specs", lambda info: info["memory_specs"][1]["params"].update(k=5)),
        ("config", lambda info: info["config"]["models"].update(llm="openai:gpt-4o-mini")),
        ("pricing", lambda info: info["pricing"]["llm"].update(input_per_mtok=0.0)),
        ("dialogue_sources", lambda info: info["dialogue_sources"].append("builtin:classic")),
    ],
)
def test_resume_refuses_a_run_json_edited_since_the_run_started(interrupted, capsys, field, change):
    edit_run_json(interrupted, change)
    before = snapshot(interrupted)
    assert main(["run", "--resume", str(interrupted), "--quiet"]) == 2
    err = one_line_error(capsys)
    assert str(interrupted / "run.json") in err
    assert "configuration changed since the run started" in err and f"({field} no" in err
    assert snapshot(interrupted) == before  # records untouched


def test_resume_accepts_edits_to_what_a_run_updates_and_an_old_run_json_with_a_warning(
    interrupted, capsys, reference
):
    edit_run_json(interrupted, lambda info: info.update(status="running", argv=["x"], python="0"))
    assert main(["run", "--resume", str(interrupted), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert records_of(interrupted) == records_of(reference)
    # a run.json from before checksums: resumed, with a warning saying it is not checked
    lines = (interrupted / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True)
    first = next(i for i, x in enumerate(lines) if '"type": "cell"' in x)
    (interrupted / RECORDS_FILE).write_text("".join(lines[: first + 1]), "utf-8")
    edit_run_json(interrupted, lambda info: info.pop(CHECKSUM_KEY))
    assert main(["run", "--resume", str(interrupted), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {interrupted / 'run.json'} has no {CHECKSUM_KEY}" in err
    assert len(err.splitlines()) == 1
    assert records_of(interrupted) == records_of(reference)
    assert CHECKSUM_KEY not in json.loads((interrupted / "run.json").read_text())


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--memory", "buffer"], "--memory"),
        (["--llm", "offline"], "--llm"),  # the default value, given: still refused
        (["--memory", "buffer", "--judge-ru", "2"], "--judge-runs, --memory"),  # abbreviated too
        (["--dialogues", SOURCE, "--no-cache"], "--dialogues, --no-cache"),
        (["--out", "elsewhere"], "--out"),
        (["--request-timeout", "5", "--jobs", "2"], "--request-timeout"),
    ],
)
def test_options_resume_does_not_take_are_refused_naming_them(interrupted, capsys, extra, named):
    before = snapshot(interrupted)
    assert main(["run", "--resume", str(interrupted), *extra]) == 2
    err = one_line_error(capsys)
    assert f"error: {named} cannot be given with --resume" in err
    assert (
        "only --jobs, --concurrency, --executor, --ray-address, --resource, --base-url, "
        "--trust-sources, --rpm, --tpm, --quiet" in err
    )
    assert snapshot(interrupted) == before


def test_options_resume_takes_are_honoured(interrupted, reference):
    extra = ["--jobs", "1", "--concurrency", "2", "--executor", "local", "--resource", "x=y"]
    assert main(["run", "--resume", str(interrupted), "--quiet", *extra]) == 0
    assert records_of(interrupted) == records_of(reference)


def test_resume_of_a_folder_without_a_run_leaves_no_lock_file_in_it(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path), "--quiet"]) == 2
    assert f"{tmp_path}: no run.json to resume" in one_line_error(capsys)
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_finished_run_leaves_no_lock_file_and_a_waiter_on_the_old_file_locks_anew(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    with hold_folder(out):
        stale = os.open(out / LOCK_FILE, os.O_RDWR)  # opened before the holder lets go
    assert not (out / LOCK_FILE).exists()
    try:
        with hold_folder(out):  # the old, removed file does not count as the lock
            assert (out / LOCK_FILE).exists()
            import fcntl

            fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # only the removed file is free
            with pytest.raises(FolderInUse):
                with hold_folder(out):
                    pass
    finally:
        os.close(stale)
    assert not (out / LOCK_FILE).exists()


def test_a_complete_run_folder_holds_no_lock_file(tmp_path):
    out = tmp_path / "run"
    assert main(run_argv(out)) == 0
    assert (out / "run.json").exists() and not (out / LOCK_FILE).exists()
