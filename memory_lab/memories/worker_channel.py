"""A memory system that runs in an environment of its own: its worker process, kept private in
a user and a network namespace, and the JSON-lines protocol between it and the run.

``hindsight`` and ``cognee`` run their systems' real packages with the Python of a separate virtual
environment (their pins are not the project's). The worker (``systems/hindsight/worker.py``,
``systems/cognee/worker.py``) is started under ``unshare`` (``isolated``), in a folder of the cell's
own that holds its HOME and temporary folder, with an environment of its own (the telemetry opt-outs
passed on by name). One request at a time: the run sends an operation; while the worker works, each
call it makes of the run's models (its LLM, its embeddings) comes back as a message and is answered
by the run's models, metered and cached; then it says ``done`` (its result) or ``failed`` (its
traceback).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_lab import telemetry
from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories.protocol import MemoryResources
from memory_lab.models.providers import json_mode

NETWORK_CHECK = "--network-check"  # the worker's argument: print "private" if it is
CHECK_TIMEOUT = 60.0  # seconds the start-up check may take (it imports nothing heavy)


@dataclass(frozen=True)
class WorkerSystem:
    """What differs between the systems run this way: the names (``Hindsight``, its memory
    ``hindsight``), the error its failures raise, the worker script, the ``unshare`` command
    (``isolated``), why it must be private (for the refusal) and its environment's extras."""

    name: str
    memory: str
    error: type[EnvironmentProblem]
    script: Path
    isolated: Callable[[], list[str]]
    private_because: str
    env: dict[str, str] = field(default_factory=dict)
    failure_chars: int | None = None  # how much of a failure's traceback a message keeps


def isolated(
    *, uid: int | None = None, gid: int | None = None, keep_caps: bool = False
) -> list[str]:
    """The command a worker runs under: a user and a network namespace of its own (``unshare``
    from util-linux 2.38 or later), as ``uid``/``gid`` in it (default: itself)."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    caps = ["--keep-caps"] if keep_caps else []
    return ["unshare", "--user", f"--map-user={uid}", f"--map-group={gid}", "--net", *caps, "--"]


def check_private(system: WorkerSystem, python: Path) -> None:
    """The worker can run in namespaces of its own here (else the system's error saying why)."""
    if shutil.which("unshare") is None:
        raise system.error(
            f"memory '{system.memory}': {system.private_because}, through unshare (util-linux), "
            "which is not installed"
        )
    try:
        check = subprocess.run(
            [*system.isolated(), str(python), "-P", "-s", "-B", str(system.script), NETWORK_CHECK],
            capture_output=True, text=True, timeout=CHECK_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise system.error(
            f"memory '{system.memory}': its environment's Python ({python}) did not answer a "
            f"start-up check within {CHECK_TIMEOUT:g} s; is it the environment's own?"
        ) from None
    if check.stdout.strip() != "private":
        said = (check.stderr.strip() or check.stdout.strip())[-400:]
        raise system.error(
            f"memory '{system.memory}': its worker could not start in a user and a network "
            f"namespace of its own ({system.private_because}; unshare from util-linux 2.38 or "
            "later; as another user than root, unprivileged user namespaces: sysctl "
            "kernel.unprivileged_userns_clone=1, and on Ubuntu "
            f"kernel.apparmor_restrict_unprivileged_userns=0): {said}"
        )


# How long a worker may stay silent while it works on a request (between two of its messages)
# before it counts as hung: its own work between two model calls (Cognee's cognify walking a
# BEAM-1M dataset takes seconds) stays far below it.
SILENCE_ENV = "MEMORY_LAB_WORKER_TIMEOUT"
DEFAULT_SILENCE = 600.0


def silence_limit() -> float:
    """Seconds a worker may be silent: ``$MEMORY_LAB_WORKER_TIMEOUT`` (a positive number),
    else ``DEFAULT_SILENCE``; ConfigError naming the variable for one that is not."""
    raw = os.environ.get(SILENCE_ENV)
    if raw is None:
        return DEFAULT_SILENCE
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise ConfigError(f"{SILENCE_ENV} must be a positive number of seconds, got {raw!r}")
    return value


class Worker:
    """A system's worker process and its JSON-lines protocol: one request at a time; the
    worker's calls of the run's models are answered (``answer``) while it works."""

    def __init__(self, system: WorkerSystem, python: Path, folder: Path, answer: Any):
        self.system = system
        self.answer = answer  # (call message) -> result
        self.folder = folder
        self.log = folder / "worker.log"
        home, tmp = folder / "home", folder / "tmp"
        for path in (home, tmp):
            path.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            # the systems order equally ranked results by way of sets: a fixed string hash
            # makes that order, and so their prompts, the same from run to run
            "PYTHONHASHSEED": "0",
            **system.env,
            **telemetry.active(),  # its environment is its own: the opt-outs are passed on by name
        }
        with open(self.log, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                # in namespaces of its own; -P: the worker's folder (memory-lab's memories, a
                # profile.py among them) must not shadow modules on its path; -s: no user
                # site; -u: the protocol unbuffered; -B: no .pyc
                [*system.isolated(), str(python), "-P", "-s", "-u", "-B", str(system.script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                encoding="utf-8",
                env=env,
                cwd=str(folder),
            )
        self.lock = threading.Lock()
        # the worker's lines, read by a thread of their own: a wait for one is bounded
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(
            target=self._read, name=f"{system.memory}-worker-reader", daemon=True
        )
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.lines.put(line)
        except (OSError, ValueError):  # closed under it: the worker is gone
            pass
        self.lines.put("")  # its end: the worker exited

    def request(self, op: str, **payload: Any) -> Any:
        """Send ``op``; answer the worker's calls until it is done; its result."""
        name, error = self.system.name, self.system.error
        with self.lock:
            if self.proc.poll() is not None:
                raise error(f"{name}'s worker has exited; its log: {self.log}")
            self._send({"op": op, **payload})
            while True:
                message = self._receive(op)
                if "done" in message:
                    return message["done"]
                if "failed" in message:
                    failure = message["failed"].rstrip()
                    if self.system.failure_chars:
                        failure = failure[-self.system.failure_chars :]
                    raise error(
                        f"{name} failed in {op!r}: {failure}\n(the worker's log: {self.log})"
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
        """The worker's next message; a worker silent for ``silence_limit()`` seconds (hung,
        or stopped with SIGSTOP) is killed and its cell fails in one line."""
        limit = silence_limit()
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            self.proc.kill()
            self.proc.wait()
            raise self.system.error(
                f"{self.system.name}'s worker sent nothing for {limit:g} s during {op!r} (hung "
                f"or stopped; {SILENCE_ENV} sets the limit); it was killed; its log: {self.log}"
            ) from None
        if not line:
            self.proc.wait(timeout=30)
            tail = self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise self.system.error(
                f"{self.system.name}'s worker exited during {op!r} (code "
                f"{self.proc.returncode}); the end of its log ({self.log}):\n{tail}"
            )
        return json.loads(line)

    def close(self) -> None:
        """Ask the worker to stop (it stops what it started), then make sure it has."""
        if self.proc.poll() is None:
            try:
                self.request("close")
            except self.system.error:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)  # it reads the end of the exited worker's output
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def answer_calls(res: MemoryResources) -> Any:
    """What answers the worker's calls: the run's memory model and embeddings."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    chat = res.memory_llm
    json_chat = json_mode(chat)
    kinds = {"system": SystemMessage, "assistant": AIMessage}

    def answer(message: dict[str, Any]) -> Any:
        kind = message["call"]
        if kind == "llm":
            converted = [
                kinds.get(m["role"], HumanMessage)(str(m["content"])) for m in message["messages"]
            ]
            reply = (json_chat if message.get("json") else chat).invoke(converted)
            usage = getattr(reply, "usage_metadata", None) or {}
            return {
                "text": str(reply.content),
                "input_tokens": int(usage.get("input_tokens", 0)),
                "output_tokens": int(usage.get("output_tokens", 0)),
            }
        if kind == "embed_query":
            return [list(res.embeddings.embed_query(t)) for t in message["texts"]]
        if kind == "embed_documents":
            return [list(v) for v in res.embeddings.embed_documents(message["texts"])]
        raise ValueError(f"unknown call from Hindsight's worker: {kind!r}")

    return answer
