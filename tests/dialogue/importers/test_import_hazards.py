"""Hostile dataset files: dates past year 9999, a FIFO in place of a file, a lone surrogate in
a message. Each is one line naming the file and the field; none hangs or shows a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.dialogue.importers import import_source
from memory_lab.dialogue.model import DialogueError

from .beam_fixture import chats
from .test_locomo_plus import HOSTS, _host, _sample, checkout

REPO = Path(__file__).resolve().parents[3]


def _one_line(call, *needles):
    with pytest.raises(DialogueError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


@pytest.mark.parametrize("gap", ["3000 years", "99999999999 years", "9" * 5000 + " weeks"])
def test_a_time_gap_past_the_calendar_is_one_line_naming_it(tmp_path, gap):
    root = checkout(tmp_path, [_sample(gap)])
    _one_line(
        lambda: import_source("locomo-plus", root),
        "locomo_plus.json: ",
        "sample 0",
        "time_gap",
    )


def test_a_host_session_in_year_9999_is_one_line_naming_its_date(tmp_path):
    hosts = [_host(h) for h in HOSTS]
    hosts[0]["conversation"]["session_3_date_time"] = "10:00 am on 30 December, 9999"
    root = checkout(tmp_path, [_sample("two weeks later")])
    (root / "data" / "locomo10.json").write_text(json.dumps(hosts), "utf-8")
    _one_line(
        lambda: import_source("locomo-plus", root, {"host": "cycle"}),
        "locomo10.json: ",
        "conv-1",
        "session_3_date_time",
    )


def _import_in_child(fmt: str, path: Path) -> subprocess.CompletedProcess:
    script = (
        "import sys\nfrom memory_lab.cli import main\nsys.exit(main(['import', *sys.argv[1:]]))"
    )
    return subprocess.run(
        [sys.executable, "-c", script, fmt, str(path), "--out", str(path.parent / "out")],
        capture_output=True,
        text=True,
        timeout=60,  # a reader blocked on the FIFO fails the test here instead of hanging it
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, fmt):
    fifo = tmp_path / "locomo10.json"
    os.mkfifo(fifo)
    done = _import_in_child(fmt, fifo)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert str(fifo) in line and "not a regular file" in line, line


def test_a_fifo_named_as_a_zip_is_refused_too(tmp_path):
    fifo = tmp_path / "locomo10.zip"
    os.mkfifo(fifo)
    done = _import_in_child("locomo", fifo)
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr


def test_a_lone_surrogate_in_a_beam_message_names_the_file_and_field(tmp_path):
    root = chats(tmp_path / "chats")
    chat = root / "100K" / "1" / "chat.json"
    data = json.loads(chat.read_text("utf-8"))
    data[1]["turns"][0][1]["content"] = "fine \ud800 not"
    chat.write_text(json.dumps(data), "utf-8")  # ASCII JSON: the surrogate as \ud800
    _one_line(
        lambda: import_source("beam", root, {"conversations": "1"}),
        f"{chat}: ",
        "[1].turns[0][1]",
        "content",
        "surrogate",
    )
