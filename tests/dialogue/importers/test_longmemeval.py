"""LongMemEval import: one dialogue per question, evidence from has_answer, abstention, export."""

from __future__ import annotations

import json
import os
import threading

import pytest

from memory_lab import load_dialogues, read_results
from memory_lab.cli import main
from memory_lab.dialogue.model import DialogueError

from ...conftest import FIXTURES

LME = FIXTURES / "longmemeval" / "longmemeval_mini.json"


def test_each_question_is_a_dialogue_with_dated_sessions_and_one_probe():
    dialogues = {d.id: d for d in load_dialogues(f"longmemeval:{LME}")}
    d = dialogues["lme-e47becba"]
    assert [s.date for s in d.sessions] == ["2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 10:10"]
    (probe,) = d.probes
    assert probe.answers == ("Business Administration",) and probe.evidence == ("s2.t1",)
    assert probe.category == "single-hop"
    assert probe.metadata["question_type"] == "single-session-user"
    assert dialogues["lme-gpt4-2655b836-abs"].probes[0].category == "abstention"
    update = dialogues["lme-6a1eabeb"].probes[0]
    assert update.category == "update" and not update.derived  # "5" is found as "five"


def test_question_date_is_kept_and_haystack_dates_date_the_sessions(tmp_path):
    dialogues = {d.id: d for d in load_dialogues(f"longmemeval:{LME}")}
    assert dialogues["lme-e47becba"].probes[0].metadata["question_date"] == "2023/05/30 (Tue) 23:40"
    update = dialogues["lme-6a1eabeb"]
    assert update.probes[0].metadata["question_date"] == "2023/06/30"
    assert [s.date for s in update.sessions] == ["2023/06/10", "2023/06/20"]
    data = json.loads(LME.read_text())
    data[2]["answer"] = "6"  # said nowhere: kept, marked derived
    del data[2]["haystack_dates"]  # sessions without dates stay undated
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    probe = {d.id: d for d in load_dialogues(f"longmemeval:{path}")}["lme-6a1eabeb"]
    assert probe.probes[0].derived and [s.date for s in probe.sessions] == [None, None]


def test_malformed_record_names_question_and_field(tmp_path):
    data = json.loads(LME.read_text())
    data[0]["haystack_sessions"][1][0]["role"] = "narrator"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DialogueError, match=r"e47becba.*haystack_sessions\[1\]\[0\]\.role"):
        load_dialogues(f"longmemeval:{bad}")


def test_run_then_export_hypotheses_for_the_official_judge(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--memory", "buffer", "--dialogues", f"longmemeval:{LME}", "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    hyp = tmp_path / "hyp.jsonl"
    assert main(["export", "longmemeval", str(out), "--out", str(hyp)]) == 0
    lines = [json.loads(x) for x in hyp.read_text().splitlines()]
    assert {x["question_id"] for x in lines} == {"e47becba", "gpt4_2655b836_abs", "6a1eabeb"}
    probes = read_results(out).probes
    replies = dict(zip(probes["probe_id"], probes["reply"], strict=True))
    assert lines[0]["hypothesis"] == replies["e47becba"]


def variant(tmp_path, change):
    data = json.loads(LME.read_text())
    change(data[0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


def run_error(tmp_path, capsys, source):
    """The one line ``run`` prints for a bad source: exit 2, no traceback, no results folder."""
    out = tmp_path / "run"
    assert main(["run", "--memory", "buffer", "--dialogues", source, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err.strip()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda q: q.update(haystack_dates=5), "haystack_dates", "must be a list, got 5"),
        (lambda q: q.update(haystack_dates=[[1]]), "haystack_dates[0]", "must be a string"),
        (lambda q: q.update(question=None), "question", "must be a non-empty string, got None"),
        (lambda q: q.update(question_type=["x"]), "question_type", "must be a non-empty string"),
        (lambda q: q.update(answer=["a", "b"]), "answer", "must be a string"),
        (
            lambda q: q["haystack_sessions"][0][0].update(content={"text": "hi"}),
            "haystack_sessions[0][0].content",
            "must be a string",
        ),
        (lambda q: q.update(question_id="e4\x1b[2J"), "question_id", "must be a printable"),
        (lambda q: q.update(extra=float("nan")), "record", "extra is nan; numbers must be finite"),
        (lambda q: q.update(extra=json.loads("[" * 50 + "]" * 50)), "record", "nested deeper"),
    ],
)
def test_malformed_questions_are_one_line_naming_file_and_field(
    tmp_path, capsys, change, field, message
):
    bad = variant(tmp_path, change)
    line = run_error(tmp_path, capsys, f"longmemeval:{bad}")
    assert line.startswith(f"memory-lab: error: {bad}: ") and f": {field}: " in line
    assert message in line and "\x1b" not in line


def test_a_deeply_nested_file_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    line = run_error(tmp_path, capsys, f"longmemeval:{deep}")
    assert line == (
        f"memory-lab: error: {deep}: document: file: JSON nested too deeply to read "
        "(limit 40 levels)"
    )


def test_a_file_over_64_mib_is_refused_unless_max_mib_allows_it(tmp_path, capsys):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: 65 MiB of apparent size, written in no time
        fh.write(LME.read_bytes())
        fh.truncate(65 * 1024 * 1024)
    line = run_error(tmp_path, capsys, f"longmemeval:{big}")
    assert line == (
        f"memory-lab: error: {big}: document: file: is 68,157,440 bytes; the limit is 67,108,864 "
        "(raise it with #max_mib=N)"
    )
    with pytest.raises(DialogueError, match="not valid JSON"):  # read now: the NUL padding
        load_dialogues(f"longmemeval:{big}#max_mib=66")


def test_a_pipe_is_refused_without_reading_it_even_with_a_writer(tmp_path):
    """A FIFO is not a dataset file: refused before it is read (one line naming it), so the
    writer offering 64 MiB never gets a reader. (With no writer at all it would be refused
    without waiting: tests/dialogue/importers/test_import_hazards.py.)"""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    written = []

    def feed():
        try:  # blocks until a reader opens the FIFO: the refusal opens it without reading
            fd = os.open(fifo, os.O_WRONLY)
        except OSError:
            return
        try:
            for _ in range(64):
                os.write(fd, b" " * (1024 * 1024))
                written.append(1)
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    with pytest.raises(DialogueError, match=r"pipe.json: .*a FIFO \(named pipe\), not a regular"):
        load_dialogues(f"longmemeval:{fifo}#max_mib=1")
    writer.join(timeout=5)
    if writer.is_alive():  # no reader ever came: unblock its open() and let it finish
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=5)
    assert len(written) <= 1  # at most the write a pipe buffers before the reader closed
