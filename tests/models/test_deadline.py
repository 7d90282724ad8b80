"""A provider that sends its headers and then trickles its body is cut off at the request
timeout, body included (httpx's per-read timeouts never trip on a byte a second)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from memory_lab.models.deadline import deadline_client
from memory_lab.models.providers import provider_chat_model


class Trickle:
    """A loopback server answering every request with headers, then one byte every 0.3 s
    (bounded: 40 bytes at most)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by close()
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 40\r\n\r\n")  # fmt: skip
            for _ in range(40):
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.3)

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.fixture
def trickle():
    server = Trickle()
    yield server
    server.close()


def test_a_trickled_body_is_cut_off_at_the_deadline(trickle):
    import httpx

    with deadline_client(1.0) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout, match="within 1 s"):
            client.get(f"http://127.0.0.1:{trickle.port}/")
        assert time.monotonic() - started < 3


def test_an_openai_chat_model_gives_up_on_a_trickling_provider_in_time(trickle, monkeypatch):
    """--request-timeout 1 with two retries: three attempts of about a second, not 12 s each
    as the 40 trickled bytes would take."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    chat = provider_chat_model(
        "openai:gpt-4o-mini",
        base_url=f"http://127.0.0.1:{trickle.port}/v1",
        timeout=1.0,
        max_retries=2,
    )
    started = time.monotonic()
    with pytest.raises(Exception, match="(?i)time"):
        chat.invoke("hello")
    assert time.monotonic() - started < 10


def test_a_body_over_its_size_limit_is_cut_off(monkeypatch):
    """A provider answering with more than MAX_RESPONSE_BYTES is refused as it streams, not
    held whole (a judge's 50 MB replies had been cached whole)."""
    import http.server

    import httpx

    from memory_lab.models import deadline

    monkeypatch.setattr(deadline, "MAX_RESPONSE_BYTES", 1000)

    class Big(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "5000")
            self.end_headers()
            self.wfile.write(b"x" * 5000)

        def log_message(self, *args) -> None: ...

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with deadline_client(5.0) as client:
            with pytest.raises(httpx.ReadError, match="larger than 1,000 bytes"):
                client.get(f"http://127.0.0.1:{server.server_address[1]}/")
            monkeypatch.setattr(deadline, "MAX_RESPONSE_BYTES", 10_000)
            assert len(client.get(f"http://127.0.0.1:{server.server_address[1]}/").content) == 5000
    finally:
        server.shutdown()
