"""A real uvicorn server on a free loopback port, in this process, for each test that asks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

pytest.importorskip("fastapi", reason="memory-lab serve needs fastapi: pip install '.[serve]'")

from memory_lab.log.config import RunConfig  # noqa: E402
from memory_lab.run.context import RunModels  # noqa: E402


@contextmanager
def running(settings) -> Iterator[str]:
    """Serve ``settings`` with uvicorn on 127.0.0.1 until the block ends; yield the base URL."""
    from memory_lab.serve.app import create_app

    with running_app(create_app(settings)) as url:
        yield url


@contextmanager
def running_app(app) -> Iterator[str]:
    """Serve a FastAPI app with uvicorn on a free 127.0.0.1 port; yield the base URL."""
    import uvicorn

    from memory_lab.serve.command import listening_socket

    sock = listening_socket(0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, access_log=False, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the server did not start (see the log above)")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="session")
def serve_models() -> RunModels:
    """Offline models answering live, shared by the servers of a session (loaded once)."""
    return RunModels.create(RunConfig(mode="live", cache=False))


@pytest.fixture
def serve(serve_models) -> Callable:
    """``serve(["buffer"], limits=, resources=, models=)``: a context manager yielding a URL."""
    import dataclasses

    from memory_lab.memories.registry import preflight_memories
    from memory_lab.run.prepare import resolve_memories
    from memory_lab.serve.app import ServeSettings
    from memory_lab.serve.guard import Limits

    def start(specs, *, limits=None, resources=None, log_messages=False, models=None):
        memories = resolve_memories(list(specs))
        preflight_memories(memories, resources or {})
        models = dataclasses.replace(models or serve_models, resources=dict(resources or {}))
        settings = ServeSettings(memories, models, limits or Limits(), log_messages=log_messages)
        return running(settings)

    return start
