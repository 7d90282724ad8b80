"""``memory-lab serve`` as a user starts it: a process on a free loopback port, then SIGTERM."""

from __future__ import annotations

import os
from pathlib import Path

from ..processes import serve_process

ROOT = Path(__file__).resolve().parents[2]


def test_serve_process_answers_on_loopback_and_stops_on_sigterm(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    log = tmp_path / "server.log"
    with serve_process(["--memory", "window:k=2"], env, log) as (server, http):
        page = http.get("/")
        assert page.status_code == 200 and "memory-lab playground" in page.text
        said = http.post("/chat/zoe", json={"message": "my locker is number 5521"})
        assert said.status_code == 200, said.text
        assert http.get("/memories").json()["memories"] == ["window:k=2"]
    text = log.read_text()
    assert server.returncode == 0, text
    assert "POST /chat/zoe 200" in text and "memory-lab serve: stopped" in text
    assert "5521" not in text  # no message text in the log
