"""Runs killed at reproducible points under every executor resume to exactly the records and
summary of an uninterrupted run: nothing lost, nothing twice.

Each kill is a SIGKILL of the whole run, workers included (``memory_lab/log/faults.py``), the N-th
time it passes a point: mid-cell (``record``), a part complete but not yet appended (``part``),
mid-append, leaving a torn line (``append``), appended but its part not yet deleted
(``commit``). The points cycle through the four with seeded counts. Sequential and thread runs
are killed 18 times, every third one's resume once more where it reaches the point; two
``--jobs 2`` runs are killed in a worker, then in the driver of their resume: at least 22
kills. ``benchmarks/fault_injection.py`` runs more.
"""

from __future__ import annotations

import signal

import pytest

from ..fault_runs import (
    Launcher,
    kill_and_resume,
    plan,
    run_argv,
    run_size,
    write_dialogues,
)

SEED = 7
RUNS = {"sequential": 10, "concurrency4": 8, "jobs2": 2}


@pytest.fixture(scope="module")
def launcher():
    with Launcher() as launcher:
        yield launcher


@pytest.fixture(scope="module")
def reference(launcher, tmp_path_factory):
    """The dialogues, and an uninterrupted run of them."""
    folder = tmp_path_factory.mktemp("faults")
    dialogues = write_dialogues(folder / "dialogues")
    out = folder / "reference"
    finished = launcher.run(run_argv(dialogues, out, "sequential"))
    assert finished.code == 0, finished.stderr
    return dialogues, out


# concurrency4 is slow (make test-slow; benchmarks/fault_injection.py kills it at many more points)
@pytest.mark.parametrize(
    "executor",
    ["sequential", pytest.param("concurrency4", marks=pytest.mark.slow), "jobs2"],
)
def test_runs_killed_at_any_point_resume_with_nothing_lost_or_twice(
    launcher, reference, tmp_path, executor
):
    dialogues, ref = reference
    kills = 0
    runs = plan(executor, RUNS[executor], SEED, run_size(ref))
    for n, (points, resume_with) in enumerate(runs):
        out = tmp_path / f"run-{n}"
        trial = kill_and_resume(launcher, dialogues, ref, out, executor, points, resume_with)
        where = f"{executor} killed at {points}: exit codes {trial.codes}"
        assert trial.codes[0] == -signal.SIGKILL and trial.codes[-1] == 0, where
        assert not trial.errors and not trial.orphans, (where, trial.errors, trial.orphans)
        assert (trial.damage.lost, trial.damage.duplicated) == (0, 0), where
        assert trial.damage.same_records and trial.damage.same_summary, where
        assert not trial.parts_left, where
        kills += trial.kills
    assert kills >= {"sequential": 10, "concurrency4": 8, "jobs2": 4}[executor]
