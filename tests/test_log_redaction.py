"""No log line carries a credential: ``memory-lab serve`` with planted passwords, and the filter.

httpx logs every request's URL at INFO, with the userinfo of a ``--base-url`` such as
``http://user:PASSWORD@host/v1``; serve logs at INFO. The filter sits on every handler (the
root's and uvicorn's), so whoever logs, the line is redacted.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from memory_lab.text.redact import MARK, RedactingFilter, redact_logs

from .models.openai_mock import OpenAIMock
from .processes import serve_process

ROOT = Path(__file__).resolve().parent.parent
URL_PASSWORD = "Pl4ntedUrlPassw0rd"
DSN_PASSWORD = "Pl4ntedDsnPassw0rd"
API_KEY = "sk-pl4nted-api-key-0123456789"


def test_a_serve_session_logs_writes_and_answers_no_planted_secret(tmp_path):
    pytest.importorskip("fastapi")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HOME": str(home),
        "OPENAI_API_KEY": API_KEY,
        "MEMORY_LAB_MAX_RETRIES": "0",
    }
    log = tmp_path / "server.log"
    answers = []
    with OpenAIMock() as mock:
        base_url = mock.base_url.replace("http://", f"http://lab:{URL_PASSWORD}@")
        args = [
            "--memory", "window:k=2", "--llm", "openai:gpt-4o-mini", "--base-url", base_url,
            "--resource", f"postgres=postgresql://lab:{DSN_PASSWORD}@127.0.0.1:1/lab",
        ]  # fmt: skip
        with serve_process(args, env, log, cwd=tmp_path) as (server, http):
            for _ in range(2):
                said = http.post("/chat/zoe", json={"message": "my locker is number 5521"})
                assert said.status_code == 200, said.text
                answers.append(said.text)
            answers += [http.get(p).text for p in ("/memory/zoe", "/dialogue/zoe", "/memories")]
        assert mock.calls("chat") >= 2  # the answering model was asked through the URL
    text = log.read_text()
    assert server.returncode == 0, text
    assert "HTTP Request: POST http://" in text  # httpx's request lines are there, redacted
    written = [
        p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()
    ]
    for secret in (URL_PASSWORD, DSN_PASSWORD, API_KEY):
        assert secret not in text
        assert not any(secret in answer for answer in answers)
        assert not any(secret in content for content in written)


def test_the_filter_redacts_messages_arguments_and_tracebacks():
    record = logging.LogRecord(
        "httpx",
        logging.INFO,
        __file__,
        1,
        "HTTP Request: %s %s",
        ("POST", "http://u:hunter2hunter2@h/v1"),
        None,
    )
    try:
        raise ValueError("cannot reach postgresql://u:s3cr3tpass@h/db")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    assert record.getMessage() == f"HTTP Request: POST http://{MARK}@h/v1"
    assert "s3cr3tpass" not in record.exc_text and f"postgresql://{MARK}@h/db" in record.exc_text


def test_redact_logs_puts_the_filter_on_every_handler_once():
    logger = logging.getLogger("memory_lab.test.redaction")
    handler = logging.StreamHandler()
    logger.addHandler(handler)
    try:
        redact_logs()
        redact_logs()
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
        assert all(
            any(isinstance(f, RedactingFilter) for f in h.filters)
            for h in [*logging.getLogger().handlers, logging.lastResort]
        )
    finally:
        logger.removeHandler(handler)
