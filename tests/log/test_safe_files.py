"""No command writes through a symbolic link planted in a results folder: a link where a file
or folder would be written is refused in one line (exit 2) and its target is left untouched."""

from __future__ import annotations

import os
import shutil

import pytest

from memory_lab.cli import main
from memory_lab.errors import BadInput
from memory_lab.log.safe_files import open_new, replacing, write_replacing

from ..conftest import FIXTURES

RUN = FIXTURES / "runs" / "v1-window-buffer"


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    return folder


@pytest.fixture
def victim(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("mine")
    return target


@pytest.mark.parametrize(
    "planted",
    ["charts/recall.png", "charts/score_tokens.svg", "report.html"],
)
def test_report_refuses_a_link_where_it_would_write(run_folder, victim, planted, capsys):
    link = run_folder / planted
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(victim)
    assert main(["report", str(run_folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"memory-lab: error: {link} is a symbolic link: memory-lab does not write through "
        "links in a results folder (remove it, or give another folder)"
    ]
    assert victim.read_text() == "mine" and link.is_symlink()


def test_report_refuses_a_charts_folder_that_is_a_link(run_folder, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_folder / "charts").symlink_to(elsewhere, target_is_directory=True)
    assert main(["report", str(run_folder)]) == 2
    assert "charts is a symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []


def test_a_written_file_is_a_regular_file_and_replacing_leaves_no_temporary(tmp_path, victim):
    path = write_replacing(tmp_path / "a.json", "{}")
    assert path.read_text() == "{}" and not path.is_symlink()
    (tmp_path / ".b.json.tmp").symlink_to(victim)  # a planted temporary is removed, not followed
    write_replacing(tmp_path / "b.json", "new")
    assert victim.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "victim.txt"]
    with pytest.raises(RuntimeError), replacing(tmp_path / "a.json") as fh:
        fh.write("half")
        raise RuntimeError("stopped")
    assert (tmp_path / "a.json").read_text() == "{}"  # an error leaves the old file
    assert not (tmp_path / ".a.json.tmp").exists()


def test_open_new_refuses_a_link_and_a_linked_folder(tmp_path, victim):
    (tmp_path / "out.csv").symlink_to(victim)
    with pytest.raises(BadInput, match="out.csv is a symbolic link"):
        open_new(tmp_path / "out.csv")
    (tmp_path / "linked").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(BadInput, match="linked is a symbolic link"):
        open_new(tmp_path / "linked" / "new.csv")
    assert victim.read_text() == "mine"
    assert not os.path.exists(tmp_path / "new.csv")


def test_a_run_refuses_a_planted_summary_link(tmp_path, victim, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.csv").symlink_to(victim)
    argv = ["run", "--memory", "window", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml")]
    assert main([*argv, "--out", str(out), "--quiet"]) == 2
    assert "summary.csv is a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "mine"


def test_a_run_s_folder_and_files_are_its_owner_s_alone(tmp_path):
    """Records hold prompts and recalled facts: the folder a run makes is 0700, its files
    0600, and so is the call cache's folder."""
    import stat

    out = tmp_path / "made" / "run"
    cache = tmp_path / "cache"
    argv = ["run", "--memory", "window", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml")]
    assert main([*argv, "--out", str(out), "--cache-dir", str(cache), "--quiet"]) == 0
    assert main(["report", str(out)]) == 0
    for folder in (out, out.parent, cache):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for name in ("records.jsonl", "summary.csv", "report.html", "charts/recall.png"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
