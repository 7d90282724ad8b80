"""A results folder that is not what a run writes: every command that reads one (``report``,
``export``, ``run --resume``) says what is wrong in one line naming the file, the line of
records.jsonl and the field, exits 2, shows no traceback and changes nothing."""

from __future__ import annotations

import json
import shutil

import pytest

from memory_lab.cli import main

from ..conftest import FIXTURES


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bad-results") / "run"
    argv = ["run", "--memory", "buffer", "window:k=1", "--judge", "offline"]
    argv += ["--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    return out


def _first(records: list[dict], kind: str) -> int:
    return next(i for i, r in enumerate(records) if r["type"] == kind)


def _changed(records: list[dict], kind: str, **fields) -> tuple[int, dict]:
    """(its index, a copy of the first ``kind`` record with ``fields`` changed; None drops)."""
    index = _first(records, kind)
    record = {**records[index], **fields}
    return index, {k: v for k, v in record.items() if v is not None}


def _line(index: int, value) -> tuple[int, str]:
    return index, value if isinstance(value, str) else json.dumps(value)


def _changed_delta(records: list[dict]) -> tuple[int, dict]:
    """(its index, the first record whose prompt is stored as a delta, with text added)."""
    index = next(i for i, r in enumerate(records) if "prompt_delta" in r)
    delta = records[index]["prompt_delta"]
    return index, {**records[index], "prompt_delta": {**delta, "pieces": [*delta["pieces"], "!"]}}


# each case: (what to do to records.jsonl, the message); a case returns (line index, new text)
RECORD_CASES = {
    "a list": (lambda rs: _line(2, []), "line 3: a record must be a JSON object, got []"),
    "null": (lambda rs: _line(2, None), "line 3: a record must be a JSON object, got null"),
    "a bare probe": (
        lambda rs: _line(2, {"type": "probe"}),
        "line 3: a probe record lacks the field 'memory'",
    ),
    "no type": (
        lambda rs: _line(2, {"memory": "buffer", "dialogue": "mini-profile"}),
        "line 3: a record lacks the field 'type'",
    ),
    "an unknown type": (
        lambda rs: _line(2, {**rs[2], "type": "turnn"}),
        'line 3: unknown record type "turnn" (known: turn, probe, usage, cell)',
    ),
    "answers not a list": (
        lambda rs: _line(*_changed(rs, "probe", answers=5)),
        "a probe record's field 'answers' must be list[str], got 5",
    ),
    "stale answers missing": (
        lambda rs: _line(*_changed(rs, "probe", stale_answers=None)),
        "a probe record lacks the field 'stale_answers'",
    ),
    "a verdict without its run": (
        lambda rs: _line(*_changed(rs, "probe", judge_verdicts=[{"prompt": "p1"}])),
        "a probe record's judge_verdicts[0] lacks the field 'run'",
    ),
    "a cell status not a string": (
        lambda rs: _line(*_changed(rs, "cell", status=1)),
        "a cell record's field 'status' must be str, got 1",
    ),
    "a cell without status": (
        lambda rs: _line(*_changed(rs, "cell", status=None)),
        "a cell record lacks the field 'status'",
    ),
    "a changed prompt delta": (
        lambda rs: _line(*_changed_delta(rs)),
        "field 'prompt_delta' does not restore its prompt from the cell's previous prompt",
    ),
    "invalid JSON": (lambda rs: _line(2, '{"type": "turn",'), "line 3: not valid JSON"),
    "an endless integer": (
        lambda rs: _line(2, '{"type": ' + "1" * 5000 + "}"),
        "line 3: not valid JSON: Exceeds the limit",
    ),
}


def _run_json(change):
    def corrupt(info: dict) -> str:
        return json.dumps(change(info))

    return corrupt


RUN_CASES = {
    "cut short": (lambda info: json.dumps(info)[:100], "cannot be read as JSON"),
    "a list": (lambda info: "[]", "must hold an object, got list"),
    "not UTF-8": (lambda info: '{"status": "caf\xe9"}', "cannot be read as JSON"),
    "judge not an object": (
        _run_json(lambda info: {**info, "judge": 5}),
        "field 'judge' must be an object, got int",
    ),
    "a grading prompt without its label": (
        _run_json(lambda info: {**info, "judge": {**info["judge"], "prompts": [{}]}}),
        "field 'judge.prompts[0]' lacks the field 'label'",
    ),
    "status not a string": (
        _run_json(lambda info: {**info, "status": 5}),
        "field 'status': must be str, got 5",
    ),
    "memories not a list": (
        _run_json(lambda info: {**info, "memories": "buffer"}),
        "field 'memories': must be a list of strings",
    ),
}

COMMANDS = {
    "report": lambda folder: ["report", str(folder)],
    "export": lambda folder: (
        ["export", "longmemeval", str(folder), "--memory", "buffer"]
        + ["--out", str(folder.parent / "hypotheses.jsonl")]
    ),
    "resume": lambda folder: ["run", "--resume", str(folder), "--quiet"],
}


def _one_line_error(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 2, err
    assert err.startswith("memory-lab: error: ") and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", RECORD_CASES)
def test_a_malformed_records_line_is_one_line_naming_file_and_line(
    judged_run, tmp_path, capsys, case, command
):
    folder = tmp_path / "run"
    shutil.copytree(judged_run, folder)
    lines = (folder / "records.jsonl").read_text("utf-8").splitlines()
    change, message = RECORD_CASES[case]
    index, text = change([json.loads(line) for line in lines])
    lines[index] = text
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    before = (folder / "records.jsonl").read_bytes()
    err = _one_line_error(COMMANDS[command](folder), capsys)
    assert f"{folder / 'records.jsonl'} line {index + 1}: " in err and message in err, err
    assert (folder / "records.jsonl").read_bytes() == before  # nothing recorded is lost


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", RUN_CASES)
def test_a_malformed_run_json_is_one_line_naming_the_file(
    judged_run, tmp_path, capsys, case, command
):
    folder = tmp_path / "run"
    shutil.copytree(judged_run, folder)
    change, message = RUN_CASES[case]
    text = change(json.loads((folder / "run.json").read_text("utf-8")))
    (folder / "run.json").write_bytes(text.encode("latin-1" if case == "not UTF-8" else "utf-8"))
    before = (folder / "records.jsonl").read_bytes()
    err = _one_line_error(COMMANDS[command](folder), capsys)
    assert f"{folder / 'run.json'}: " in err and message in err, err
    assert (folder / "records.jsonl").read_bytes() == before
