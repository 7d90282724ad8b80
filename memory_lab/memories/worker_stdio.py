"""The worker's side of ``worker_channel``: JSON lines on stdin/stdout, standard library only.

A worker runs in its system's own environment, without memory_lab on its path (``python -P``),
and loads this file by its path (``systems/hindsight/worker.py``, ``systems/cognee/worker.py``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any


class Channel:
    """The JSON-lines channel to the memory: requests in, calls out, one at a time."""

    def __init__(self) -> None:
        self.inp = sys.stdin
        # The protocol gets its own copy of stdout; fd 1 becomes stderr, so whatever a library
        # prints lands in the log instead of the protocol
        self.out = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message, ensure_ascii=False) + "\n")
        self.out.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.inp.readline()
        return json.loads(line) if line else None

    def call(self, kind: str, **payload: Any) -> Any:
        """Ask the memory to run ``kind`` (a model call, an embedding); its result."""
        with self.lock:
            self.send({"call": kind, **payload})
            reply = self.receive()
        if reply is None:
            raise RuntimeError("the memory closed the channel during a call")
        if "error" in reply:
            raise RuntimeError(f"{kind} failed in the memory: {reply['error']}")
        return reply["result"]
