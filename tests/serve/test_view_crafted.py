"""``memory-lab view`` over a crafted results tree: links that loop or lead out are not followed,
a pipe where a file should be is refused in one line instead of taking a thread, one slow run
does not starve the others, and SIGTERM ends the process.

Every request has a timeout and every pipe is opened for writing at the end (which ends any
read still waiting on it), so a regression fails here instead of hanging the suite."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from memory_lab.cli import main
from memory_lab.serve import viewer as viewer_module
from memory_lab.serve.viewer import ViewSettings, create_view_app

from ..conftest import FIXTURES
from ..processes import CLI, ROOT, session_processes
from .conftest import running_app

MINI = FIXTURES / "dialogues" / "mini.yaml"
CROWD = 42  # more requests at once than the server has threads (40)
TIMEOUT = 20  # seconds: far more than any answer here takes


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("view-crafted") / "run"
    argv = ["run", "--memory", "buffer", "--dialogues", str(MINI), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


def _copy(run_folder, to):
    shutil.copytree(run_folder, to)
    return to


def _fifo_instead(path):
    path.unlink()
    os.mkfifo(path)
    return path


@contextmanager
def released(*fifos):
    """On leaving, open each pipe for writing while anyone waits to read it (an end of file
    for them), so a reader stuck on one cannot outlive the test."""
    try:
        yield
    finally:
        deadline = time.monotonic() + 10
        waiting = True
        while waiting and time.monotonic() < deadline:
            waiting = False
            for fifo in fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                    waiting = True
                    time.sleep(0.01)
                except OSError as exc:  # ENXIO: nobody is reading it
                    assert exc.errno == errno.ENXIO, exc


def _crowd(url: str, path: str, params, count: int = CROWD) -> list[httpx.Response | Exception]:
    def get(_):
        try:
            return httpx.get(url + path, params=params, timeout=TIMEOUT)
        except httpx.HTTPError as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(get, range(count)))


def test_links_below_the_folders_given_are_not_followed_and_each_run_is_listed_once(
    run_folder, tmp_path
):
    root = tmp_path / "results"
    _copy(run_folder, root / "run")
    for n in range(5):
        (root / f"x{n}").symlink_to(".")  # each a loop back to the folder
    _copy(run_folder, tmp_path / "outside" / "secret")
    (root / "out").symlink_to(tmp_path / "outside")  # a link out of the folder given
    alias = tmp_path / "alias"
    alias.symlink_to(root)  # a folder given may itself be a link
    app = create_view_app(ViewSettings([str(root), str(alias), str(root / "run")]))
    with running_app(app) as url:
        runs = httpx.get(url + "/api/runs", timeout=60).json()["runs"]
    assert [(r["key"], r["name"]) for r in runs] == [(str(root / "run"), "run")]


def test_a_fifo_for_records_is_refused_and_every_other_run_still_answers(run_folder, tmp_path):
    root = tmp_path / "results"
    good = _copy(run_folder, root / "good")
    fifo = _fifo_instead(_copy(run_folder, root / "bad") / "records.jsonl")
    with released(fifo), running_app(create_view_app(ViewSettings([str(root)]))) as url:
        crowd = _crowd(url, "/api/compare", {"run": str(root / "bad")})
        answer = httpx.get(url + "/api/compare", params={"run": str(good)}, timeout=TIMEOUT)
        assert answer.status_code == 200, answer.text
        assert [type(r).__name__ for r in crowd if not isinstance(r, httpx.Response)] == []
        assert {(r.status_code, r.json()["error"]) for r in crowd} == {
            (422, f"bad: {fifo}: is a FIFO (named pipe), not a regular file")
        }


def test_a_slow_run_does_not_starve_the_others(run_folder, tmp_path, monkeypatch):
    root = tmp_path / "results"
    good = _copy(run_folder, root / "good")
    slow = _copy(run_folder, root / "slow")
    go_on, reads = threading.Event(), []
    read_results = viewer_module.read_results

    def slowly(path, **options):
        reads.append(path)
        if path == slow:
            go_on.wait(60)
        return read_results(path, **options)

    monkeypatch.setattr(viewer_module, "read_results", slowly)
    settings = ViewSettings([str(root)])
    settings.request_seconds = 1  # a request waits 1 s for its reading, then a 503
    try:
        with running_app(create_view_app(settings)) as url:
            started = time.monotonic()
            crowd = _crowd(url, "/api/compare", {"run": str(slow)})
            answer = httpx.get(url + "/api/compare", params={"run": str(good)}, timeout=TIMEOUT)
            assert answer.status_code == 200, answer.text
            assert time.monotonic() - started < TIMEOUT
            statuses = [r.status_code if isinstance(r, httpx.Response) else r for r in crowd]
            assert statuses == [503] * CROWD
            assert crowd[0].json()["error"] == (
                "run slow: not ready after 1 s (it goes on); try again shortly"
            )
            assert reads.count(slow) == 1  # one reading, shared by every request for it
            go_on.set()
            for _ in range(50):  # the reading finishes on its own, then answers
                later = httpx.get(url + "/api/compare", params={"run": str(slow)}, timeout=60)
                if later.status_code != 503:
                    break
            assert later.status_code == 200, later.text
            assert reads.count(slow) == 1
    finally:
        go_on.set()


def test_a_fifo_named_as_the_dialogue_source_is_not_waited_on(run_folder, tmp_path):
    root = tmp_path / "results"
    run = _copy(run_folder, root / "run")
    fifo = tmp_path / "dialogues.json"
    os.mkfifo(fifo)
    spec = json.loads((run / "run.json").read_text("utf-8"))
    spec["dialogues"][0]["source"] = f"locomo:{fifo}"
    (run / "run.json").write_text(json.dumps(spec), "utf-8")
    params = {"run": str(run), "dialogue": "mini-profile", "probe": "q-cat"}
    with released(fifo), running_app(create_view_app(ViewSettings([str(root)]))) as url:
        probe = httpx.get(url + "/api/probe", params=params, timeout=TIMEOUT)
        assert probe.status_code == 200, probe.text
        data = probe.json()
        assert data["texts_found"] is False and data["evidence"] == [{"id": "cat", "text": None}]


def test_a_folder_named_as_the_dialogue_source_is_not_parsed(run_folder, tmp_path):
    """run.json records each dialogue's own file: a folder there (/usr) is not read through,
    even one holding the dialogue."""
    root = tmp_path / "results"
    run = _copy(run_folder, root / "run")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    shutil.copy(MINI, folder / "mini.yaml")
    spec = json.loads((run / "run.json").read_text("utf-8"))
    spec["dialogues"][0]["source"] = str(folder)
    (run / "run.json").write_text(json.dumps(spec), "utf-8")
    params = {"run": str(run), "dialogue": "mini-profile", "probe": "q-cat"}
    with running_app(create_view_app(ViewSettings([str(root)]))) as url:
        probe = httpx.get(url + "/api/probe", params=params, timeout=TIMEOUT)
        assert probe.status_code == 200, probe.text
        assert probe.json()["texts_found"] is False
        spec["dialogues"][0]["source"] = str(folder / "mini.yaml")  # its file: read
        (run / "run.json").write_text(json.dumps(spec), "utf-8")
    with running_app(create_view_app(ViewSettings([str(root)]))) as url:
        probe = httpx.get(url + "/api/probe", params=params, timeout=TIMEOUT)
        assert probe.json()["texts_found"] is True


def test_sigterm_stops_the_viewer_with_requests_on_a_fifo(run_folder, tmp_path):
    root = tmp_path / "results"
    _copy(run_folder, root / "good")
    fifo = _fifo_instead(_copy(run_folder, root / "bad") / "records.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    log = tmp_path / "view.log"
    with session_processes() as start, released(fifo), log.open("w") as stderr:
        view = start(
            [*CLI, "view", str(root), "--port", "0"], env, stdout=subprocess.PIPE, stderr=stderr
        )
        line = view.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, line + log.read_text()
        crowd = _crowd(url.group(), "/api/compare", {"run": str(root / "bad")})
        view.send_signal(signal.SIGTERM)
        try:
            code = view.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"memory-lab view still running {TIMEOUT} s after SIGTERM")
    assert code == 0 and "memory-lab view: stopped" in log.read_text()
    assert all(isinstance(r, httpx.Response) and r.status_code == 422 for r in crowd)
