"""The ``cognee`` memory's side of its worker: the process, its namespaces, its protocol.

The worker (``cognee_worker.py``) runs with the Python of Cognee's environment in a user and a
network namespace of its own (``unshare --user --net``) whose only interface, the loopback, is
left down: Cognee needs no network (its stores are embedded; its models are the run's, reached
over the worker's stdin/stdout), so nothing it or a library under it tries leaves the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from memory_lab.errors import EnvironmentProblem
from memory_lab.telemetry import OFF as TELEMETRY_OFF

WORKER = Path(__file__).with_name("cognee_worker.py")
NETWORK_CHECK = "--network-check"


class CogneeError(EnvironmentProblem):
    """The worker failed (its traceback, and where its log is), or could not be made private."""


def isolated() -> list[str]:
    """The command the worker runs under: a user and a network namespace of its own, itself in
    it (``unshare`` from util-linux 2.38 or later)."""
    return [
        "unshare", "--user", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}", "--net",
        "--",
    ]  # fmt: skip


def check_private(python: Path) -> None:
    """The worker can run in namespaces of its own here (else CogneeError saying why)."""
    if shutil.which("unshare") is None:
        raise CogneeError(
            "memory 'cognee': its worker runs in a network namespace of its own, through "
            "unshare (util-linux), which is not installed"
        )
    check = subprocess.run(
        [*isolated(), str(python), "-P", "-s", "-B", str(WORKER), NETWORK_CHECK],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if check.stdout.strip() != "private":
        said = (check.stderr.strip() or check.stdout.strip())[-400:]
        raise CogneeError(
            "memory 'cognee': its worker could not start in a user and a network namespace of "
            "its own, which keep it off every network (unshare from util-linux 2.38 or later; "
            "as another user than root, unprivileged user namespaces: sysctl "
            "kernel.unprivileged_userns_clone=1, and on Ubuntu "
            f"kernel.apparmor_restrict_unprivileged_userns=0): {said}"
        )


class Worker:
    """Cognee's worker process and its JSON-lines protocol: one request at a time; the worker's
    calls of the run's models are answered while it works."""

    def __init__(self, python: Path, folder: Path, answer: Any):
        self.answer = answer  # (call message) -> result
        self.log = folder / "worker.log"
        home, tmp = folder / "home", folder / "tmp"
        for path in (home, tmp):
            path.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",  # set orders, and so prompts, the same from run to run
            **TELEMETRY_OFF,  # its environment is its own: the opt-outs are passed on by name
        }
        with open(self.log, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                # -P: the worker's folder (memory-lab's memories) must not shadow modules on
                # its path; -s: no user site; -u: the protocol unbuffered; -B: no .pyc
                [*isolated(), str(python), "-P", "-s", "-u", "-B", str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                encoding="utf-8",
                env=env,
                cwd=str(folder),
            )
        self.lock = threading.Lock()

    def request(self, op: str, **payload: Any) -> Any:
        """Send ``op``; answer the worker's calls until it is done; its result."""
        with self.lock:
            if self.proc.poll() is not None:
                raise CogneeError(f"Cognee's worker has exited; its log: {self.log}")
            self._send({"op": op, **payload})
            while True:
                message = self._receive(op)
                if "done" in message:
                    return message["done"]
                if "failed" in message:
                    raise CogneeError(
                        f"Cognee failed in {op!r}: {message['failed'].rstrip()[-3000:]}\n"
                        f"(the worker's log: {self.log})"
                    )
                try:
                    reply: dict[str, Any] = {"result": self.answer(message)}
                except Exception as exc:  # noqa: BLE001 - sent on; raised in the worker
                    self._send({"error": f"{type(exc).__name__}: {exc}"})
                    raise
                self._send(reply)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()

    def _receive(self, op: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            tail = self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise CogneeError(
                f"Cognee's worker exited during {op!r} (code {self.proc.returncode}); the end "
                f"of its log ({self.log}):\n{tail}"
            )
        return json.loads(line)

    def close(self) -> None:
        """Ask the worker to stop, then make sure it has."""
        if self.proc.poll() is None:
            try:
                self.request("close")
            except CogneeError:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
