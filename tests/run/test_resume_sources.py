"""A resume imports no code a results folder names: only memory-lab's memories, installed entry
points, or the module file recorded (path and SHA-256) when the run started, unchanged;
anything else is refused naming the memory, and ``--trust-sources`` imports it anyway."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import FIXTURES

MODULE = """
from memory_lab import TextMemory, register_memory


class LastLine(TextMemory):
    last: str = ""

    def context(self, query):
        return f"Human: {self.last}" if self.last else ""

    def remember(self, user, assistant):
        self.last = user


@register_memory("last_line", "the last user line")
def last_line(res) -> LastLine:
    return LastLine()
"""


def memory_lab(cwd, *args):
    """``python -m memory_lab.cli`` in ``cwd`` (on its import path, as for a user)."""
    return subprocess.run(
        [sys.executable, "-m", "memory_lab.cli", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture
def custom_run(tmp_path):
    (tmp_path / "mine.py").write_text(MODULE)
    mini = str(FIXTURES / "dialogues" / "mini.yaml")
    done = memory_lab(
        tmp_path, "run", "--memory", "mine:last_line", "--dialogues", mini, "--out", "run",
        "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tmp_path


def interrupt(folder):
    """The run as a kill would leave it: its last cell's records gone, its status running."""
    lines = (folder / "records.jsonl").read_text().splitlines(keepends=True)
    (folder / "records.jsonl").write_text(lines[0])
    run = json.loads((folder / "run.json").read_text())
    run["status"] = "interrupted"
    (folder / "run.json").write_text(json.dumps(run))


def edit_spec(folder, **changes):
    run = json.loads((folder / "run.json").read_text())
    spec = run["memory_specs"][0]
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    run.pop("config_sha256", None)  # as a crafted folder would: a warning only
    (folder / "run.json").write_text(json.dumps(run))


def test_the_run_records_its_module_file_and_a_resume_imports_it_unchanged(custom_run):
    run = json.loads((custom_run / "run" / "run.json").read_text())
    (spec,) = run["memory_specs"]
    assert spec["source"] == "mine:last_line"
    assert spec["source_file"] == str((custom_run / "mine.py").resolve())
    assert len(spec["source_sha256"]) == 64
    interrupt(custom_run / "run")
    done = memory_lab(custom_run, "run", "--resume", "run", "--quiet")
    assert done.returncode == 0, done.stderr


def test_a_changed_module_is_refused_unless_trusted(custom_run):
    interrupt(custom_run / "run")
    (custom_run / "mine.py").write_text(MODULE + "\nprint('changed code ran')\n")
    done = memory_lab(custom_run, "run", "--resume", "run", "--quiet")
    assert done.returncode == 2 and "changed code ran" not in done.stdout
    assert "mine.py changed since the run started (--trust-sources" in done.stderr
    trusted = memory_lab(custom_run, "run", "--resume", "run", "--quiet", "--trust-sources")
    assert trusted.returncode == 0, trusted.stderr
    assert "changed code ran" in trusted.stdout


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"source": "this:x", "source_file": None, "source_sha256": None}, "does not record"),
        ({"source": "this:x"}, "now resolves to"),  # a stdlib module, not the recorded file
        ({"source_file": None}, "does not record the file and SHA-256"),
    ],
)
def test_a_source_the_run_did_not_record_is_refused(custom_run, changes, said):
    interrupt(custom_run / "run")
    edit_spec(custom_run / "run", **changes)
    done = memory_lab(custom_run, "run", "--resume", "run", "--quiet")
    assert done.returncode == 2, done.stderr
    assert "Beautiful is better than ugly" not in done.stdout  # `this` was never imported
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("memory-lab: error:")]
    assert "memory 'last_line'" in line and said in line and "--trust-sources" in line


def test_a_resume_reads_run_json_as_report_does(custom_run, tmp_path):
    folder = custom_run / "run"
    (tmp_path / "elsewhere.json").write_text((folder / "run.json").read_text())
    (folder / "run.json").unlink()
    (folder / "run.json").symlink_to(tmp_path / "elsewhere.json")
    done = memory_lab(custom_run, "run", "--resume", "run", "--quiet")
    assert done.returncode == 2 and "run.json" in done.stderr and "link" in done.stderr
