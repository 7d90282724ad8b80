"""``memory-lab sweep`` end to end on the real command line: runs measured into their folders,
a report written from them, a dry run that runs nothing, and a sweep killed with SIGKILL that
finishes when started again with the same records as one never stopped, none twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ..fault_runs import MEMORIES, compare, wait_for_empty_group, write_dialogues
from ..processes import CLI, ROOT, session_processes

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/smaps_rollup"), reason="Linux /proc only"
)

SPEC = """\
name: faults
title: Two Korean dialogues, each its own run
memories: [{memories}]
options: {{jobs: 2, no_prompts: true}}
sources:
  - key: '{{name}}'
    title: 'The {{name}} dialogue'
    dialogues: '${{DIALOGUES}}/{{name}}.yaml'
    vary: [{{name: cafe}}, {{name: hiking}}]
report: {{answer: true, growth: true}}
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("sweep")
    dialogues = write_dialogues(folder / "dialogues")
    path = folder / "faults.yaml"
    path.write_text(SPEC.format(memories=", ".join(MEMORIES)), encoding="utf-8")
    return path, dialogues


def sweep(spec: Path, dialogues: str, out: Path, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "sweep", str(spec), "--out", str(out), "--set", f"DIALOGUES={dialogues}", *more],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )


@pytest.fixture(scope="module")
def whole(spec, tmp_path_factory) -> Path:
    """One sweep run to its end without a stop."""
    out = tmp_path_factory.mktemp("whole")
    done = sweep(*spec, out)
    assert done.returncode == 0, done.stderr
    return out


def test_a_sweep_measures_each_run_and_reports_it(spec, whole):
    log = json.loads((whole / "sweep.json").read_text())
    assert set(log["runs"]) == {"cafe", "hiking"}
    for key, entry in log["runs"].items():
        assert entry["dialogues"].endswith(f"/{key}.yaml")
        (call,) = entry["invocations"]
        assert call["exit_code"] == 0 and not call["resumed"]
        assert call["wall"] > 0 and call["cpu"] > 0
        assert call["peak_pss"] > 50 * 2**20 and call["processes"] >= 2  # the run and a worker
        assert call["sampler_cpu"] < 0.05 * call["wall"]
        assert (whole / key / "run.json").is_file()
    report = sweep(*spec, whole, "--report-only", "--markdown")
    assert report.returncode == 0, report.stderr
    text = report.stdout
    assert "## The cafe dialogue (cafe)" in text and "## The hiking dialogue (hiking)" in text
    assert "1 invocation(s): wall" in text and "the sampler used" in text
    assert "| memory | cells ok | evid-recall |" in text
    assert "| buffer | 1/1 | 100.0% |" in text
    assert "## The answer per run" in text and "## Growth" in text
    # started again, a complete run is kept as it is: no second invocation
    again = sweep(*spec, whole)
    assert again.returncode == 0, again.stderr
    assert f"cafe: complete in {whole / 'cafe'}; kept" in again.stderr
    log = json.loads((whole / "sweep.json").read_text())
    assert [len(e["invocations"]) for e in log["runs"].values()] == [1, 1]


def test_a_dry_run_prints_the_commands_and_runs_nothing(spec, tmp_path):
    out = tmp_path / "dry"
    done = sweep(*spec, out, "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["cafe", "hiking"]
    assert f"--out {out / 'cafe'}" in lines[0] and "--no-prompts" in lines[0]
    assert not out.exists()


def test_a_run_a_variable_leaves_unset_is_left_out_or_refused(spec, tmp_path):
    path, _ = spec
    done = subprocess.run(
        [*CLI, "sweep", str(path), "--out", str(tmp_path / "x"), "--dry-run", "--only", "cafe"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "sources[0].vary[0]: ${DIALOGUES} is not set (give --set DIALOGUES=VALUE)" in (
        done.stderr
    )


def test_a_sweep_killed_with_sigkill_finishes_when_started_again(spec, whole, tmp_path):
    path, dialogues = spec
    out = tmp_path / "killed"
    records = out / "cafe" / "records.jsonl"
    argv = [*CLI, "sweep", str(path), "--out", str(out), "--set", f"DIALOGUES={dialogues}"]
    with session_processes() as start:
        proc = start(argv, env={"HF_HUB_OFFLINE": "1"}, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        # kill the sweep alone, mid-run: once the first run has recorded a few exchanges
        while not (records.is_file() and records.read_bytes().count(b"\n") >= 4):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the sweep never got there"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # the run it measured, and the run's workers, die with it
        assert wait_for_empty_group(proc.pid, 20) == []
    again = sweep(path, dialogues, out)
    assert again.returncode == 0, again.stderr
    log = json.loads((out / "sweep.json").read_text())
    # the invocation the kill cut short is counted, unmeasured; then the resume, measured
    calls = log["runs"]["cafe"]["invocations"]
    shape = [(c.get("stopped", False), c["resumed"]) for c in calls]
    assert shape == [(True, False), (False, True)]
    assert "wall" not in calls[0] and calls[1]["wall"] > 0
    report = sweep(path, dialogues, out, "--report-only")
    assert "1 more stopped before it ended (the sweep was killed; not measured" in report.stdout
    for key in ("cafe", "hiking"):
        damage = compare(out / key, whole / key)
        assert (damage.lost, damage.duplicated) == (0, 0), key
        assert damage.same_records and damage.same_summary, key
