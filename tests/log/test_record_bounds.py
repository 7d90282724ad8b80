"""Every figure a record holds is bounded where it is declared: shares from 0 to 1, seconds
finite and at least 0, counts whole from 0 to 2^63-1; a folder holding one out of range is
refused naming the file, the line and the field, never summed into a table."""

from __future__ import annotations

import json
import shutil

import pytest

from memory_lab.cli import main
from memory_lab.log.records import record_problem

from ..conftest import FIXTURES

PROBE = {
    "type": "probe",
    "memory": "m",
    "dialogue": "d",
    "category": "single-hop",
    "answers": ["Paris"],
    "stale_answers": [],
}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("evidence_recall", 5.0, "a share from 0 to 1"),
        ("evidence_recall", -0.1, "a share from 0 to 1"),
        ("bleu1", 1.5, "a share from 0 to 1"),
        ("turn_ndcg_any_at_5", float("nan"), "a share from 0 to 1"),
        ("seconds", float("inf"), "a finite number of seconds"),
        ("recall_seconds", -1.0, "a finite number of seconds"),
        ("prompt_tokens", -700, "a whole number from 0 to 2^63-1"),
        ("judge_input_tokens", 10**300, "a whole number from 0 to 2^63-1"),
    ],
)
def test_a_figure_out_of_its_range_is_a_problem(field, value, said):
    problem = record_problem({**PROBE, field: value})
    assert problem is not None and f"field {field!r} must be {said}" in problem
    assert record_problem({**PROBE, field: 0}) is None  # the bound, not the field, refused


def test_a_turn_with_negative_tokens_is_a_problem_and_bounds_let_none_pass():
    turn = {"type": "turn", "memory": "m", "dialogue": "d", "prompt_tokens": -(10**15)}
    assert "must be a whole number from 0" in record_problem(turn)
    assert record_problem({**PROBE, "evidence_recall": None, "judge_calls": None}) is None


def test_report_refuses_a_folder_with_a_share_out_of_range(tmp_path, capsys):
    folder = tmp_path / "run"
    shutil.copytree(FIXTURES / "runs" / "v1-window-buffer", folder)
    lines = (folder / "records.jsonl").read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if '"type": "probe"' in line)
    record = json.loads(lines[n])
    record["evidence_recall"] = 5.0  # had shown "buffer 233.3%"
    lines[n] = json.dumps(record)
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"line {n + 1}" in err and "'evidence_recall' must be a share from 0 to 1" in err


@pytest.mark.parametrize("where", ["run.json", "records.jsonl"])
def test_json_nested_100k_deep_is_one_line(tmp_path, capsys, where):
    """A RecursionError traceback (exit 70) had ended report and view on such a file."""
    folder = tmp_path / "run"
    shutil.copytree(FIXTURES / "runs" / "v1-window-buffer", folder)
    deep = "[" * 100_000 + "]" * 100_000
    if where == "run.json":
        (folder / "run.json").write_text(deep)
    else:
        with open(folder / "records.jsonl", "a") as fh:
            fh.write(deep + "\n")
    assert main(["report", str(folder)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert where in line and "nested too deeply" in line


def test_a_lone_surrogate_in_a_reply_is_written_as_the_replacement_character():
    """A provider's reply carrying JSON "\\ud800" had ended a run in UnicodeEncodeError."""
    from memory_lab.log.record_log import dump_record

    line = dump_record({**PROBE, "reply": "Busan\ud800!"})
    assert json.loads(line.encode("utf-8"))["reply"] == "Busan\ufffd!"
    assert (
        dump_record({**PROBE, "reply": "부산"})
        == json.dumps({**PROBE, "reply": "부산"}, ensure_ascii=False, sort_keys=True) + "\n"
    )  # other text as it was
