"""The crafted corpus of issue 55 in one table: each case a results folder someone else made
(a figure out of range, a file held twice, JSON too deep, a link where a file is written), each
answered by ``memory-lab report`` with one line naming what is wrong and exit code 2, and the
file a link points at left alone."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_lab.cli import main

from ..conftest import FIXTURES

RUN = FIXTURES / "runs" / "v1-window-buffer"


def _records(folder: Path) -> list[str]:
    return (folder / "records.jsonl").read_text().splitlines()


def _set_field(kind: str, field: str, value: object) -> Callable[[Path, Path], None]:
    def craft(folder: Path, _outside: Path) -> None:
        lines = _records(folder)
        n = next(i for i, line in enumerate(lines) if f'"type": "{kind}"' in line)
        record = json.loads(lines[n])
        record[field] = value
        lines[n] = json.dumps(record)  # NaN and Infinity as Python's json writes them
        (folder / "records.jsonl").write_text("\n".join(lines) + "\n")

    return craft


def _twice(folder: Path, _outside: Path) -> None:
    lines = _records(folder)
    (folder / "records.jsonl").write_text("\n".join(lines + lines[1:]) + "\n")


def _deep(folder: Path, _outside: Path) -> None:
    with open(folder / "records.jsonl", "a") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")


def _linked_run_json(folder: Path, outside: Path) -> None:
    (outside / "run.json").write_text((folder / "run.json").read_text())
    (folder / "run.json").unlink()
    (folder / "run.json").symlink_to(outside / "run.json")


def _linked_chart(folder: Path, outside: Path) -> None:
    (folder / "charts").mkdir(exist_ok=True)
    for chart in (folder / "charts").iterdir():
        chart.unlink()
    (folder / "charts" / "recall.png").symlink_to(outside / "victim.txt")


def _linked_charts_folder(folder: Path, outside: Path) -> None:
    shutil.rmtree(folder / "charts", ignore_errors=True)
    (folder / "charts").symlink_to(outside, target_is_directory=True)


CASES = {
    "share out of range": (_set_field("probe", "evidence_recall", 5.0), "share from 0 to 1"),
    "NaN share": (_set_field("probe", "evidence_recall", float("nan")), "share from 0 to 1"),
    "infinite seconds": (_set_field("turn", "seconds", float("inf")), "finite number of seconds"),
    "negative tokens": (_set_field("turn", "prompt_tokens", -(10**15)), "whole number from 0"),
    "10^300 tokens": (_set_field("turn", "prompt_tokens", 10**300), "whole number from 0"),
    "records held twice": (_twice, "records held twice"),
    "JSON 100k deep": (_deep, "nested too deeply"),
    "run.json a link": (_linked_run_json, "symbolic link"),
    "a chart a link": (_linked_chart, "link"),
    "the charts folder a link": (_linked_charts_folder, "link"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_crafted_folder_is_one_line_and_exit_2(case, tmp_path, capsys):
    craft, said = CASES[case]
    folder, outside = tmp_path / "run", tmp_path / "outside"
    shutil.copytree(RUN, folder)
    outside.mkdir()
    (outside / "victim.txt").write_text("mine")
    craft(folder, outside)
    assert main(["report", str(folder)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines
    assert (outside / "victim.txt").read_text() == "mine"
    assert sorted(os.listdir(outside)) in (["victim.txt"], ["run.json", "victim.txt"])
