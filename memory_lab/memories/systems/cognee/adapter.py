"""``cognee``: Cognee's memory (``cognee``), each exchange cognified into a knowledge graph.

After each exchange its lines (``User: ...`` / ``Assistant: ...``) are *added* to Cognee as one
document, tagged with a node set naming the exchange (``exchange-N``), and *cognified*: Cognee
chunks it, its graph extraction call turns each chunk into entities and relations
(``KnowledgeGraph``), its summarisation call summarises it (``SummarizedContent``), and it
stores chunks, entities, summaries and edges in its graph and vector stores. Each turn's context
is Cognee's *search* for the user's message with ``only_context`` (the context its completion
would be given, no answer generated), by the search type chosen (``search_type``; by default
``HYBRID_COMPLETION``, the default of ``cognee.search``). The context is shown as Cognee
formats it, split into its blocks; a block names the turns of the exchanges whose text it shows
or whose node set it names, so evidence recall credits what is shown, no more.

Cognee runs in a worker process of its own (``worker.py``) with the Python of a separate
virtual environment (``.venv-cognee``, made by ``make setup``; elsewhere ``--resource
cognee_python=PATH``): its pins (pandas 2, onnxruntime 1.23) are not the project's. Its stores
are embedded (SQLite, the Ladybug graph database, LanceDB) in a folder of the cell's own
(``cognee/``, mode 0700) that also holds the worker's HOME and temporary folder, dropped when
the cell ends unless ``keep=true``. The worker runs in a user and a network namespace of its own
with no interface up: nothing it does reaches any network.

The run's models drive it: every call Cognee makes to its LLM comes back to this process and
goes to the run's memory model (its prompt as Cognee's ``litellm_native`` adapter sends it on
its JSON path, the response schema appended, a JSON object asked for), metered and cached as any
call of the run; its embeddings are the run's (queries as queries). Cognee's telemetry is off
(``TELEMETRY_DISABLED``).

Offline, the run's memory model answers Cognee's calls by their response schema, as it does any
system's it knows (docs/memories/cognee.md); this module does not know which model it is.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Literal

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories import worker_channel
from memory_lab.memories.protocol import Exchange, Item, MemoryResources, Query, Recall, SessionInfo
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.memories.systems.cognee import SYSTEM
from memory_lab.memories.worker_channel import Worker, WorkerSystem, answer_calls

FOLDER = "cognee"
PYTHON_RESOURCE = "cognee_python"
ENVIRONMENT = SYSTEM.environment  # its own virtual environment, declared with the system
VENV = ENVIRONMENT.folder  # beside the project, made by `make setup`
HEADER = "Memories (Cognee's search context, as Cognee gives it):"
SPEAKERS = ("User", "Assistant")
SearchType = Literal[
    "HYBRID_COMPLETION", "GRAPH_COMPLETION", "RAG_COMPLETION", "TRIPLET_COMPLETION", "CHUNKS",
    "SUMMARIES",
]  # fmt: skip
_TAG = re.compile(r"\bexchange-(\d+)\b")
_BLOCKS = re.compile(r"\n\s*\n|\n---\n|\n(?=#{2,3} )")
# Cognee's graph holds these besides what the extraction made
_STRUCTURE = {"DocumentChunk", "TextDocument", "TextSummary", "NodeSet", "EntityType", "EdgeType"}

__all__ = ["CogneeError", "CogneeMemory"]


class CogneeError(EnvironmentProblem):
    """The worker failed (its traceback, and where its log is), or could not be made private."""


COGNEE = WorkerSystem(
    name="Cognee",
    memory="cognee",
    error=CogneeError,
    script=Path(__file__).with_name("worker.py"),
    isolated=worker_channel.isolated,
    private_because="its worker runs in a user and a network namespace of its own, whose "
    "loopback is left down: nothing Cognee or a library under it tries leaves the machine",
    failure_chars=3000,
)


def check_private(python: Path) -> None:
    """The worker can run in namespaces of its own here (else CogneeError saying why)."""
    worker_channel.check_private(COGNEE, python)


def default_python() -> Path:
    """Cognee's Python in the project's ``.venv-cognee``."""
    return ENVIRONMENT.default_python()


def cognee_python(resource: Any) -> Path:
    """``--resource cognee_python=PATH`` (or ``MEMORY_LAB_COGNEE_PYTHON``), else the project's
    ``.venv-cognee``; ConfigError saying how to make one when there is none."""
    try:
        given = resource(PYTHON_RESOURCE)
    except KeyError:
        given = None
    path = Path(given) if given else default_python()
    if not path.exists():
        where = f"--resource {PYTHON_RESOURCE}={given}" if given else f"{path} (none there)"
        raise ConfigError(
            f"memory 'cognee' runs in an environment of its own, and found no Python at {where}: "
            f"run `make setup` (it makes {VENV}), or make one with `python3 -m venv DIR "
            f"&& DIR/bin/pip install -c constraints-cognee.txt cognee` and pass --resource "
            f"{PYTHON_RESOURCE}=DIR/bin/python"
        )
    return path


def preflight_cognee(params: dict[str, Any], resource: Any) -> None:
    """Before a run: Cognee's environment is there, holds Cognee, and its worker can run in
    namespaces of its own."""
    python = cognee_python(resource)
    check = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(bool(u.find_spec('cognee')))"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if check.stdout.strip() != "True":
        raise ConfigError(
            f"memory 'cognee': {python} lacks cognee: install it into it "
            f"(-c constraints-cognee.txt) {check.stderr.strip()[-200:]}".rstrip()
        )
    check_private(python)


def _flat(text: str) -> str:
    return " ".join(text.split())


class CogneeMemory:
    """Cognee cognifying each exchange; recall is Cognee's search context for the user's
    message."""

    def __init__(self, worker: Worker, *, search_type: str = "HYBRID_COMPLETION", top_k: int = 10):
        self.worker = worker
        self.search_type = search_type
        self.top_k = top_k
        self.exchange_turns: dict[int, tuple[str, ...]] = {}
        self.exchange_texts: dict[int, str] = {}  # whitespace-flattened
        self.documents: dict[int, str] = {}  # each exchange as Cognee was given it

    def observe(self, exchange: Exchange) -> None:
        lines = [f"{SPEAKERS[0]}: {exchange.user}"] if exchange.user else []
        if exchange.assistant:
            lines.append(f"{SPEAKERS[1]}: {exchange.assistant}")
        if not lines:
            return
        text = "\n".join(lines)
        self.exchange_turns[exchange.index] = exchange.turn_ids
        self.exchange_texts[exchange.index] = _flat(text)
        self.documents[exchange.index] = text
        self.worker.request("remember", text=text, tag=f"exchange-{exchange.index}")

    def turns_shown(self, block: str) -> tuple[str, ...]:
        """The turns of the exchanges ``block`` shows (their whole text) or names (their node
        set), in exchange order."""
        flat = _flat(block)
        named = {int(n) for n in _TAG.findall(block)}
        shown = [
            i for i, text in self.exchange_texts.items() if i in named or (text and text in flat)
        ]
        return tuple(dict.fromkeys(t for i in sorted(shown) for t in self.exchange_turns[i]))

    def recall(self, query: Query) -> Recall:
        if not query.text or not self.exchange_turns:
            return Recall((), ranking=())
        contexts = self.worker.request(
            "search", query=query.text, search_type=self.search_type, top_k=self.top_k
        )["contexts"]
        blocks = [b.strip() for c in contexts for b in _BLOCKS.split(c) if b.strip()]
        items = [Item(b, self.turns_shown(b), "retrieved") for b in blocks]
        if not items:
            return Recall((), ranking=())
        return Recall((Item(HEADER, (), "other"), *items), ranking=tuple(i.turn_ids for i in items))

    def end_session(self, session: SessionInfo) -> None:
        """Cognee's dataset spans sessions; nothing to do."""

    def graph(self) -> dict[str, Any]:
        return self.worker.request("graph")

    def snapshot(self) -> dict[str, Any]:
        graph = self.graph()
        entities = sorted(
            (n for n in graph["nodes"] if n["type"] not in _STRUCTURE),
            key=lambda n: (n["name"], n["id"]),
        )
        return {
            "search_type": self.search_type,
            "nodes": len(graph["nodes"]),
            "edges": len(graph["edges"]),
            "entities": [
                {"name": n["name"], "type": n["type"], "text": n["text"]} for n in entities
            ],
            "summaries": sorted(n["text"] for n in graph["nodes"] if n["type"] == "TextSummary"),
        }

    def held_texts(self) -> list[str]:
        """What Cognee keeps: each exchange's document (its data, which its chunks hold whole
        in its vector store: counted once), then the texts of the graph's other nodes, its
        entities and summaries."""
        nodes = self.graph()["nodes"]
        derived = [n["text"] for n in nodes if n["text"] and n["type"] != "DocumentChunk"]
        return [*self.documents.values(), *derived]

    def close(self) -> None:
        """The worker and the folder go through ``on_close``."""


@register_memory(
    "cognee",
    "Cognee (cognee) on its embedded stores (SQLite, Ladybug graph, LanceDB), in an environment "
    "of its own: each exchange added and cognified into a knowledge graph of entities, "
    "relations and summaries; the context is Cognee's search context for the user's message.",
    {
        "search_type": ParamDoc("Cognee's search type whose context is shown (only_context)"),
        "top_k": ParamDoc("results Cognee's search retrieves", min=1),
        "keep": ParamDoc("keep Cognee's stores (the cell's cognee/ folder)"),
    },
    roles=("memory",),
    preflight=preflight_cognee,
    system=SYSTEM,
)
def cognee(
    res: MemoryResources,
    search_type: SearchType = "HYBRID_COMPLETION",
    top_k: int = 10,
    keep: bool = False,
) -> CogneeMemory:
    python = cognee_python(res.resource)
    if res.cell_dir is not None:
        folder = Path(res.cell_dir) / FOLDER
    else:  # no run folder (the inspector, a notebook): a private temporary one
        folder = Path(tempfile.mkdtemp(prefix="memory-lab-cognee-"))
        keep = False
    shutil.rmtree(folder, ignore_errors=True)  # a cell replays from its start: new stores
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    if not keep:
        res.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    else:  # the worker's scratch goes; the stores stay
        res.on_close(lambda: [shutil.rmtree(folder / p, ignore_errors=True) for p in ("tmp",)])
    worker = Worker(COGNEE, python, folder, answer_calls(res))
    res.on_close(worker.close)
    dimension = len(res.embeddings.embed_query("dimension"))
    worker.request("start", folder=str(folder), dimension=dimension, cognify={})
    return CogneeMemory(worker, search_type=search_type, top_k=top_k)
