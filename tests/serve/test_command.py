"""``memory-lab serve`` as a user starts it: a process on a free loopback port, then SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def test_serve_process_answers_on_loopback_and_stops_on_sigterm(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "memory_lab.cli", "serve", "--port", "0"]
    cmd += ["--memory", "window:k=2"]
    log = tmp_path / "server.log"
    with log.open("w") as stderr:
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            line = server.stdout.readline()
            url = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            assert url, line
            with httpx.Client(base_url=url.group(), timeout=120) as http:
                for _ in range(200):  # until uvicorn accepts
                    try:
                        page = http.get("/")
                        break
                    except httpx.ConnectError:
                        time.sleep(0.05)
                assert page.status_code == 200 and "memory-lab playground" in page.text
                said = http.post("/chat/zoe", json={"message": "my locker is number 5521"})
                assert said.status_code == 200, said.text
                assert http.get("/memories").json()["memories"] == ["window:k=2"]
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert "POST /chat/zoe 200" in text and "memory-lab serve: stopped" in text
    assert "5521" not in text  # no message text in the log
