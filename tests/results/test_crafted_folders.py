"""A crafted results folder: ``memory-lab report`` (``read_records``, ``read_results``) reads only
regular files in the folder, within their limits, and refuses anything else in one line (exit 2)
instead of hanging on a pipe, reading a device without end or building a prompt of gigabytes.

Each command runs as a real process with a time limit and an address-space limit, so a
regression fails here rather than hanging or exhausting the suite."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess

import pytest

from memory_lab.cli import main
from memory_lab.log.prompt_store import DELTA_FIELD
from memory_lab.results import read as read_module
from memory_lab.results.read import read_records, read_results

from ..conftest import FIXTURES
from ..processes import CLI, ROOT

SECONDS = 60  # far more than a refusal takes (a few seconds, mostly imports)
MEMORY = 2 * 1024**3  # address space of the child: a reader without bounds fails fast


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("crafted") / "run"
    argv = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml")]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture
def folder(run_folder, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_folder, copy)
    return copy


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def report(folder) -> tuple[int, str]:
    """``memory-lab report FOLDER`` in a bounded child: (exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    try:
        done = subprocess.run(
            [*CLI, "report", str(folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=SECONDS,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"memory-lab report {folder} still running after {SECONDS} s")
    return done.returncode, done.stderr.strip()


def test_records_as_a_fifo_is_refused_without_waiting(folder):
    records = folder / "records.jsonl"
    records.unlink()
    os.mkfifo(records)
    code, err = report(folder)
    assert code == 2, err
    assert err == f"memory-lab: error: {records}: is a FIFO (named pipe), not a regular file"


def test_records_linked_to_dev_zero_is_refused_without_reading(folder):
    records = folder / "records.jsonl"
    records.unlink()
    records.symlink_to("/dev/zero")
    code, err = report(folder)
    assert code == 2, err
    assert err == (
        f"memory-lab: error: {records}: is a symbolic link; a results folder's files are read "
        "only as regular files in it"
    )


def test_records_linked_out_of_the_folder_is_refused(folder, tmp_path):
    records = folder / "records.jsonl"
    outside = tmp_path / "elsewhere.jsonl"
    records.rename(outside)
    records.symlink_to(outside)
    with pytest.raises(ValueError, match="is a symbolic link"):
        read_records(folder)


def test_run_json_as_a_fifo_is_refused_without_waiting(folder):
    run_file = folder / "run.json"
    run_file.unlink()
    os.mkfifo(run_file)
    code, err = report(folder)
    assert code == 2, err
    assert err == f"memory-lab: error: {run_file}: is a FIFO (named pipe), not a regular file"


def test_records_over_the_size_limit_are_refused_before_reading(folder, monkeypatch):
    size = (folder / "records.jsonl").stat().st_size
    monkeypatch.setattr(read_module, "MAX_RECORDS_BYTES", size - 1)
    with pytest.raises(ValueError) as caught:
        read_results(folder)
    assert str(caught.value) == (
        f"{folder / 'records.jsonl'}: is {size:,} bytes; the limit is {size - 1:,} "
        "(MAX_RECORDS_BYTES)"
    )


def test_a_delta_of_two_million_spans_is_refused_before_it_is_built(folder):
    """The brief's 20 MB line: 2,000,000 copies of the whole previous prompt would build a
    prompt of gigabytes before its digest is checked."""
    file = folder / "records.jsonl"
    lines = file.read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    index = next(i for i, r in enumerate(records) if DELTA_FIELD in r)
    before = read_records(folder)[: index - 1]  # line 0 is the format header, which it skips
    prompts = [r["prompt"] for r in before if r.get("prompt")]
    previous = len(prompts[-1])  # the cell's previous prompt, restored
    crafted = {**records[index], DELTA_FIELD: {"pieces": [[0, previous]] * 2_000_000}}
    crafted[DELTA_FIELD]["digest"] = "0" * 16
    lines[index] = json.dumps(crafted)
    file.write_text("\n".join(lines) + "\n", "utf-8")
    code, err = report(folder)
    assert code == 2, err
    assert err == (
        f"memory-lab: error: {file} line {index + 1}: a {records[index]['type']} record's field "
        "'prompt_delta' has 2,000,000 pieces; the limit is 1,000,000 (MAX_DELTA_PIECES)"
    )


def test_prompts_restored_beyond_their_total_limit_are_refused(folder, monkeypatch):
    """Each delta may copy its whole previous prompt: many tiny lines could restore gigabytes
    together. The total is bounded; a reader that needs no prompt text reads on."""
    monkeypatch.setattr(read_module, "MAX_RESTORED_CHARS", 1000)
    with pytest.raises(ValueError, match=r"line \d+: its prompts restored come to more than 1,000"):
        read_records(folder)
    assert len(read_results(folder, prompts=False).probes) == 4
