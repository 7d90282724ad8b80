"""Both web apps (``serve`` and ``view``) refuse a request carrying more than one Host header,
whichever comes first: a loopback Host beside a foreign one must not let the request through."""

from __future__ import annotations

import socket

import pytest

from memory_lab.serve.viewer import ViewSettings, create_view_app

from .conftest import running_app


def raw_get(url: str, path: str, hosts: list[str]) -> tuple[int, bytes]:
    """GET ``path`` over a plain socket with these Host header lines, in this order; the status
    and the body."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    lines = [f"GET {path} HTTP/1.1", *(f"Host: {h}" for h in hosts), "Connection: close", "", ""]
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1"))
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def two_hosts(port: str) -> list[list[str]]:
    loopback = f"127.0.0.1:{port}"
    return [
        ["evil.example", loopback],  # the foreign one first: what a dict of headers lets through
        [loopback, "evil.example"],
        [loopback, loopback],
        ["localhost", loopback],
    ]


def assert_refuses_two_hosts(url: str, path: str, answered: int = 200) -> None:
    port = url.rsplit(":", 1)[1]
    for hosts in two_hosts(port):
        status, body = raw_get(url, path, hosts)
        assert status == 400, (hosts, body)
        assert b"2 Host headers" in body and b'"status":400' in body
    status, _ = raw_get(url, path, [f"127.0.0.1:{port}"])  # one loopback Host: answered
    assert status == answered


def test_serve_refuses_two_host_headers(serve):
    with serve(["buffer"]) as url:
        assert_refuses_two_hosts(url, "/memories")
        assert_refuses_two_hosts(url, "/memory/mona")


def test_view_refuses_two_host_headers(tmp_path):
    with running_app(create_view_app(ViewSettings([str(tmp_path)]))) as url:
        assert_refuses_two_hosts(url, "/")
        assert_refuses_two_hosts(url, "/api/runs", answered=404)  # an empty folder: no runs


def test_check_host_counts_the_headers():
    from memory_lab.serve.guard import RequestError, check_host

    check_host("127.0.0.1:8765")
    for hosts in (("evil.example", "127.0.0.1"), ("127.0.0.1", "127.0.0.1")):
        with pytest.raises(RequestError) as refused:
            check_host(*hosts)
        assert refused.value.status == 400
    with pytest.raises(RequestError) as refused:
        check_host()
    assert refused.value.status == 421
