"""The ``cognee`` memory: Cognee's pipelines in their own environment, on embedded stores in the
cell's folder, every LLM call and embedding the run's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.errors import ConfigError
from memory_lab.memories import MemorySpecError, parse_memory_spec, tokens_held
from memory_lab.memories.protocol import Query
from memory_lab.memories.systems.cognee.adapter import default_python, preflight_cognee
from memory_lab.memories.systems.cognee.rules import RULES, SCHEMA_MARK, schema_title
from memory_lab.models.offline_rules import RuleSettings

from ..conftest import FIXTURES
from .replay import replayed, run_twice_on_mock


@pytest.fixture(scope="module")
def coffee():
    """A favourite coffee shop that changes a month later; a marathon said once."""
    return load_dialogues(FIXTURES / "memories" / "coffee-change.yaml")[0]


def _prompt(title: str, chunk: str) -> list[tuple[str, str]]:
    schema = json.dumps({"title": title, "type": "object", "properties": {}}, indent=2)
    system = f"Extract.\n\n{SCHEMA_MARK}{schema}\n```\nDo not include any text outside the JSON."
    return [("system", system), ("human", chunk)]


def test_parameters_are_checked_when_the_spec_is_parsed():
    assert parse_memory_spec("cognee").params == {
        "search_type": "HYBRID_COMPLETION",
        "top_k": 10,
        "keep": False,
    }
    assert parse_memory_spec("cognee:search_type=CHUNKS").params["search_type"] == "CHUNKS"
    with pytest.raises(MemorySpecError, match="'search_type' must be one of HYBRID_COMPLETION"):
        parse_memory_spec("cognee:search_type=CYPHER")
    with pytest.raises(MemorySpecError, match="'top_k' must be at least 1"):
        parse_memory_spec("cognee:top_k=0")


def test_a_missing_environment_says_how_to_make_one(tmp_path):
    missing = tmp_path / "nowhere" / "python"
    with pytest.raises(ConfigError, match="no Python at --resource cognee_python=.*make setup"):
        preflight_cognee({}, lambda name: str(missing))
    preflight_cognee({}, lambda name: str(default_python()))  # make setup-cognee made this one


def test_the_rule_script_answers_cognees_schemas_from_the_chunk():
    from memory_lab.models.offline_memory import OfflineMemoryModel

    chunk = "User: My favourite coffee shop is Blue Bottle. The rain is heavy.\nAssistant: Nice."
    reply = OfflineMemoryModel().invoke(_prompt("KnowledgeGraph", chunk))
    graph = json.loads(reply.content)
    assert [n["name"] for n in graph["nodes"]] == ["user", "Blue Bottle"]
    assert graph["edges"] == [
        {
            "source_node_id": "user",
            "target_node_id": "Blue Bottle",
            "relationship_name": "favourite",
            "description": "My favourite coffee shop is Blue Bottle.",
        }
    ]
    summary = RULES["SummarizedContent"](chunk, RuleSettings())["summary"]
    assert summary.endswith("\n- My favourite coffee shop is Blue Bottle.")
    assert RULES["KnowledgeGraph"]("User: The rain is heavy.", RuleSettings())["nodes"] == []
    assert schema_title(_prompt("SummarizedContent", chunk)[0][1]) == "SummarizedContent"


CONCURRENT_CALLS = """
import asyncio, importlib.util, random, sys, threading, time
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
import os, tempfile
from pathlib import Path
os.environ.update(worker.cognee_env(Path(tempfile.mkdtemp()), 4))  # before Cognee is imported

class Channel:  # answers after a random wait, as a model or an embedding does
    def __init__(self):
        self.seen = []
    def call(self, kind, **payload):
        time.sleep(random.random() / 100)
        text = payload["messages"][1]["content"] if kind == "llm" else payload["texts"][0]
        self.seen.append((text, threading.get_ident()))
        if kind == "llm":
            return {"text": "ok"}
        return [[0.5] * 4 for _ in payload["texts"]]

async def tasks(channel):
    llm = worker.run_llm(channel)
    embeddings = worker.run_embeddings(channel, 4, [False])
    async def one(i):  # as Cognee's tasks: created in order, run concurrently
        await asyncio.sleep(0)
        if i % 3 == 0:
            await embeddings.embed_text([f"task {i}"])
        else:
            await llm.acreate_structured_output(f"task {i}", "Summarize.", str)
    await asyncio.gather(*(one(i) for i in range(12)))

for attempt in range(5):
    channel = Channel()
    asyncio.run(tasks(channel))
    print([text for text, _ in channel.seen] == [f"task {i}" for i in range(12)],
          {ident for _, ident in channel.seen} == {threading.main_thread().ident})
"""


def test_cognees_concurrent_calls_are_answered_in_the_order_its_tasks_run(tmp_path):
    # Cognee extracts a cognify's chunks and summaries as concurrent tasks. Answered in threads
    # of their own, the calls finished in whichever order the threads took the channel, and
    # the graph and vectors were written in an order that varied from run to run
    import os
    import subprocess

    from memory_lab.memories.systems.cognee import worker as cognee_worker

    script = tmp_path / "concurrent_calls.py"
    script.write_text(CONCURRENT_CALLS)
    done = subprocess.run(
        [str(default_python()), str(script), cognee_worker.__file__],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # in task order, on the event loop's thread, every time, whatever each answer's wait
    assert [line for line in done.stdout.split("\n") if line.startswith(("True", "False"))] == [
        "True True"
    ] * 5


def test_an_unknown_cognee_schema_fails_naming_it():
    from memory_lab.memories.systems.cognee.rules import CogneeRuleError
    from memory_lab.models.offline_memory import OfflineMemoryModel

    with pytest.raises(CogneeRuleError, match="no rule for Cognee's response schema 'Ontology'"):
        OfflineMemoryModel().invoke(_prompt("Ontology", "User: hi"))


def test_each_exchange_is_cognified_and_recall_is_cognees_context_naming_its_turns(
    coffee, run_models, tmp_path
):
    models = dataclasses.replace(run_models, work_dir=str(tmp_path))
    cell = replayed("cognee", coffee, models)
    folders = [Path(p) for p in (tmp_path / "cells").glob("*/cognee")]
    assert len(folders) == 1
    stores = folders[0] / "system" / "databases"
    assert (stores / "cognee.lancedb").is_dir() and (stores / "cognee_graph_ladybug").exists()
    assert (folders[0] / "home" / ".cognee").is_dir()  # Cognee's logs, in the cell's folder
    recall = cell.memory.recall(Query("Which coffee shop is my favourite?", "s2", "2026-02-20"))
    assert recall.items[0].text == "Memories (Cognee's search context, as Cognee gives it):"
    new = next(i for i in recall.items if i.text.startswith("### ritual roasters"))
    assert new.turn_ids == ("coffee-v2", "s2.t4")  # the entity names its exchange's node set
    passage = next(i for i in recall.items if i.text.startswith("User: My favourite coffee"))
    assert passage.turn_ids in (("coffee-v1", "s1.t2"), ("coffee-v2", "s2.t4"))
    assert recall.ranking == tuple(i.turn_ids for i in recall.items[1:])
    assert cell.memory.recall(Query("")).items == ()
    snapshot = cell.memory.snapshot()
    assert [e["name"] for e in snapshot["entities"]] == [
        "blue bottle", "kyoto", "ritual roasters", "user",
    ]  # fmt: skip
    assert tokens_held(cell.memory) > 0
    usage, by_role = cell.maintenance()
    # per exchange: one graph extraction and one summary call
    assert [r for r, _, _ in by_role] == ["memory"]
    assert usage.llm_calls == 8 and usage.output_tokens > 0 and usage.embedding_tokens > 0
    cell.close()
    assert not folders[0].exists()  # dropped without keep
    again = replayed("cognee", coffee, run_models)
    assert again.memory.snapshot() == snapshot
    again.close()


def test_a_run_gives_an_evidence_recall_figure_and_keeps_the_stores_when_asked(coffee, tmp_path):
    outcome = run_benchmark(
        resolve_memories(["cognee:keep=true"]), [coffee], tmp_path / "run", progress=False
    )
    assert outcome.failed_cells == 0
    probes = read_results(outcome.path).probes.set_index("probe_id")
    assert probes.loc["q-coffee", "evidence_recall"] == 1.0
    assert "Ritual Roasters" in probes.loc["q-coffee", "prompt"]
    turns = read_results(outcome.path).turns
    assert turns["memory_llm_calls"].sum() == 8
    kept = list((tmp_path / "run" / "cells").glob("*/cognee/system/databases/cognee.lancedb"))
    assert len(kept) == 1


def _cognee_model(body: dict) -> str:
    """A 'model' behind the mock: Cognee's calls answered by the offline rules, as JSON."""
    title = schema_title(body["messages"][0]["content"])
    return json.dumps(RULES[title](body["messages"][-1]["content"], RuleSettings()))


def test_cognees_prompts_reach_the_provider_metered_and_a_rerun_is_cached(
    tmp_path, monkeypatch, coffee
):
    runs = run_twice_on_mock("cognee", coffee, tmp_path, monkeypatch, reply=_cognee_model)
    assert runs.failed_cells == [0, 0]
    ours = [r for r in runs.requests if schema_title(r["messages"][0]["content"])]
    titles = [schema_title(r["messages"][0]["content"]) for r in ours]
    assert titles.count("KnowledgeGraph") == 4 and titles.count("SummarizedContent") == 4
    assert ours[0]["messages"][0]["content"].startswith("You are a top-tier algorithm")
    assert all(r["response_format"] == {"type": "json_object"} for r in ours)
    turns = runs.turns
    assert turns["memory_llm_calls"].sum() == len(ours)  # every call metered
    assert (turns.loc[turns["memory_llm_calls"] > 0, "memory_output_tokens"] > 0).all()
    assert runs.again_calls == 0  # the same prompts again: all from the cache
    assert list(runs.rerun_turns["memory_llm_calls"]) == list(turns["memory_llm_calls"])


def test_two_replays_give_the_same_chunk_ids_and_context(coffee, run_models):
    # Cognee minted each added document a random id (uuid4(), ingest_data.py:326), its chunks'
    # ids derive from it, and its hybrid search breaks ties between equally ranked passages by
    # chunk id (ranking.py:55): two replays showed tied passages in either order
    # (`memory-lab check cognee`, replays-repeat at builtin:classic's bakery s1.t9)
    def ids_and_context():
        cell = replayed("cognee", coffee, run_models)
        try:
            nodes = cell.memory.graph()["nodes"]
            chunks = sorted(n["id"] for n in nodes if n["type"] == "DocumentChunk")
            query = Query("Which coffee shop is my favourite?", "s2", "2026-02-20")
            return chunks, [i.text for i in cell.memory.recall(query).items]
        finally:
            cell.close()

    first = ids_and_context()
    assert first[0] and first == ids_and_context()


NEIGHBOURHOOD = """
import asyncio, importlib.util, os, random, sys, tempfile
from pathlib import Path
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
os.environ.update(worker.cognee_env(Path(tempfile.mkdtemp()), 4))  # before Cognee is imported
from cognee.infrastructure.databases.graph.ladybug.adapter import LadybugAdapter

NODES = [(i, {"name": i}) for i in ("e2", "e1", "chunk", "user", "set")]
EDGES = [
    ("chunk", "e1", "contains", {}), ("user", "e1", "sell", {}), ("e1", "set", "belongs", {}),
    ("e1", "t", "is_a", {}), ("chunk", "e2", "contains", {}), ("e2", "set", "belongs", {}),
]

async def unordered(self, node_ids, depth=1, edge_types=None):  # as Ladybug: no order
    return random.sample(NODES, len(NODES)), random.sample(EDGES, len(EDGES))

LadybugAdapter.get_neighborhood = unordered
worker.ordered_neighborhood()
seen = {repr(asyncio.run(LadybugAdapter.get_neighborhood(None, ["e2", "e1"]))) for _ in range(20)}
nodes, edges = asyncio.run(LadybugAdapter.get_neighborhood(None, ["e2", "e1"]))
print(len(seen), [n for n, _ in nodes], [e[:3] for e in edges])
"""


def test_an_entitys_unranked_edges_come_in_one_order(tmp_path):
    # Cognee shows the edges its fact search did not rank in the order Ladybug's
    # get_neighborhood returns them (a set of ids fed to a query with no ORDER BY), which
    # varied between two replays (builtin:classic's bakery at s2.t23)
    import os
    import subprocess

    from memory_lab.memories.systems.cognee import worker as cognee_worker

    script = tmp_path / "neighbourhood.py"
    script.write_text(NEIGHBOURHOOD)
    done = subprocess.run(
        [str(default_python()), str(script), cognee_worker.__file__],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "1 ['e2', 'e1', 'chunk', 'set', 'user'] "
        "[('e2', 'set', 'belongs'), ('e1', 'set', 'belongs'), ('e1', 't', 'is_a'), "
        "('chunk', 'e1', 'contains'), ('chunk', 'e2', 'contains'), ('user', 'e1', 'sell')]"
    )
