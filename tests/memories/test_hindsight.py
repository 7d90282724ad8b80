"""The ``hindsight`` memory: Hindsight's engine in its own environment, on its embedded
PostgreSQL, facts learnt into observations."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.errors import EXIT_ENVIRONMENT, ConfigError
from memory_lab.memories import MemorySpecError, parse_memory_spec, tokens_held
from memory_lab.memories.protocol import Query
from memory_lab.memories.systems.hindsight.adapter import (
    HindsightError,
    default_python,
    preflight_hindsight,
)
from memory_lab.memories.systems.hindsight.rules import RULES, schema_title
from memory_lab.models.offline_rules import RuleSettings

from ..conftest import FIXTURES
from .replay import exchange, replayed, run_isolated, run_twice_on_mock


@pytest.fixture(scope="module")
def coffee():
    """A favourite coffee shop that changes a month later; a marathon said once."""
    return load_dialogues(FIXTURES / "memories" / "coffee-change.yaml")[0]


def test_parameters_are_checked_when_the_spec_is_parsed():
    assert parse_memory_spec("hindsight").params == {
        "max_tokens": 4096,
        "budget": "mid",
        "types": ["world", "experience", "observation"],
        "keep": False,
    }
    assert parse_memory_spec("hindsight:types=observation").params["types"] == ["observation"]
    with pytest.raises(MemorySpecError, match="'budget' must be one of low, mid, high"):
        parse_memory_spec("hindsight:budget=max")
    with pytest.raises(MemorySpecError, match="'max_tokens' must be at least 64"):
        parse_memory_spec("hindsight:max_tokens=10")
    with pytest.raises(MemorySpecError, match="'types' must name fact types among world"):
        parse_memory_spec("hindsight:types=world+opinion")


def test_a_missing_environment_says_how_to_make_one(tmp_path):
    missing = tmp_path / "nowhere" / "python"
    with pytest.raises(ConfigError, match="no Python at --resource hindsight_python=.*make setup"):
        preflight_hindsight({}, lambda name: str(missing))
    preflight_hindsight({}, lambda name: str(default_python()))  # make setup made this one


def test_an_environment_with_a_dateparser_hindsight_cannot_read_is_refused(tmp_path):
    # dateparser 1.5 returns three values per date found, where Hindsight 1.1.0 unpacks two
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho True 1.5.0\n")  # what the check asks, as 1.5 answers
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ConfigError, match="dateparser 1.5.0, whose dates Hindsight 1.1.0 cannot"):
        preflight_hindsight({}, lambda name: str(python))


def test_a_machine_where_the_worker_cannot_be_made_private_is_refused(tmp_path, monkeypatch):
    # unshare refused, as where user namespaces are off: the database would be open to every
    # local user, so the run does not start
    fake = tmp_path / "bin" / "unshare"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    with pytest.raises(
        HindsightError, match="could not start in a user and a network namespace"
    ) as e:
        preflight_hindsight({}, lambda name: str(default_python()))
    assert "Operation not permitted" in str(e.value) and e.value.exit_code == EXIT_ENVIRONMENT


REPLAY_DAY = """
import importlib.util, sys
from datetime import datetime
from hindsight_api.engine import memory_engine
from hindsight_api.engine.search.temporal_extraction import extract_temporal_constraint
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
clock = worker.ReplayClock()
clock.install()
clock.set("2023-05-08T13:56:00+00:00")
def day(query):
    found = extract_temporal_constraint(query)
    return found and f"{found[0]:%Y-%m-%d}..{found[1]:%Y-%m-%d}"
print(day("What did I tell you yesterday?"))
print(day("My favourite coffee shop is now Ritual Roasters."))
print(day("What did I paint on 7 May 2023?"))
print(day("Which coffee shop is my favourite?"))
print(f"{memory_engine._recall_scoring_now(None):%Y-%m-%d %H:%M %Z}")
print(f"{memory_engine._recall_scoring_now(datetime(2023, 6, 1)):%Y-%m-%d}")
"""


def test_hindsights_dates_resolve_against_the_replays_day_not_the_wall_clock(tmp_path):
    import subprocess

    from memory_lab.memories.systems.hindsight import worker as hindsight_worker

    script = tmp_path / "replay_day.py"
    script.write_text(REPLAY_DAY)
    done = subprocess.run(
        [str(default_python()), str(script), hindsight_worker.__file__],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # relative dates, in a recall's query or in a fact consolidation recalls by its text,
    # against the day of the exchange (a replay of 2023 resolves them in 2023), and read
    assert done.stdout.split("\n")[:6] == [
        "2023-05-07..2023-05-07",
        "2023-05-08..2023-05-08",
        "2023-05-07..2023-05-07",
        "None",
        "2023-05-08 13:56 UTC",  # recency scored from the replay's day without a question date
        "2023-06-01",  # and from the question's date when it has one
    ]
    assert "Temporal query analysis raised" not in done.stderr


def test_each_exchange_is_retained_as_facts_and_learnt_into_observations(nurse, run_models):
    cell = replayed("hindsight", nurse, run_models, upto=0)
    memory = cell.memory
    memory.observe(exchange(0, "I prefer aisle seats on flights.", date="2026-03-02"))
    memory.observe(exchange(1, "The weather is nice today."))  # no fact: no consolidation
    memory.observe(exchange(2, "I now prefer window seats on flights.", date="2026-03-09"))
    snapshot = memory.snapshot()
    assert [(f["fact"], f["mentioned_at"], f["turn_ids"]) for f in snapshot["facts"]] == [
        ("I prefer aisle seats on flights. | Involving: user", "2026-03-02", ["u0", "a0"]),
        ("I now prefer window seats on flights. | Involving: user", "2026-03-09", ["u2", "a2"]),
    ]
    # consolidation updated the one observation to the newer value
    assert snapshot["observations"] == ["I now prefer window seats on flights."]
    usage, by_role = cell.maintenance()
    assert [r for r, _, _ in by_role] == ["memory"]
    # three extraction calls; two consolidation calls (the exchanges with a fact)
    assert usage.llm_calls == 5 and usage.input_tokens > 10000 and usage.embedding_tokens > 0
    assert tokens_held(memory) > 0
    cell.close()


def test_recall_is_hindsights_dated_facts_and_observations_naming_their_turns(
    coffee, run_models, tmp_path
):
    import dataclasses

    models = dataclasses.replace(run_models, work_dir=str(tmp_path))
    cell = replayed("hindsight", coffee, models)
    folders = [Path(p) for p in (tmp_path / "cells").glob("*/hindsight")]
    assert len(folders) == 1 and (folders[0] / "data" / "PG_VERSION").exists()  # in the cell
    assert (folders[0] / "worker.log").read_text().count("engine ready") == 1
    recall = cell.memory.recall(Query("Which coffee shop is my favourite?", "s2", "2026-02-20"))
    texts = [i.text for i in recall.items]
    assert texts[0] == "Memories (Hindsight's recall, most relevant first):"
    facts = [i for i in recall.items if i.kind == "fact"]
    observations = [i for i in recall.items if i.kind == "summary"]
    new = next(f for f in facts if "Ritual Roasters" in f.text)
    assert new.text.endswith("(mentioned 2026-02-20)") and new.turn_ids == ("coffee-v2", "s2.t4")
    learnt = next(o for o in observations if "Ritual Roasters" in o.text)
    # the observation was consolidated from both coffee facts: it names both exchanges
    assert learnt.turn_ids == ("coffee-v1", "s1.t2", "coffee-v2", "s2.t4")
    assert recall.ranking == tuple(i.turn_ids for i in recall.items[1:])  # Hindsight's order
    assert cell.memory.recall(Query("")).items == ()
    observed = cell.memory.recall(Query("Which coffee shop is my favourite?"))
    snapshot = cell.memory.snapshot()
    cell.close()
    assert not folders[0].exists()
    again = replayed("hindsight", coffee, run_models)  # ids from the cell's counters
    assert again.memory.snapshot() == snapshot
    assert again.memory.recall(Query("Which coffee shop is my favourite?")) == observed
    again.close()


def test_a_changed_fact_updates_the_observation_and_is_answered_new(coffee, tmp_path):
    outcome = run_benchmark(
        resolve_memories(["hindsight:keep=true"]), [coffee], tmp_path / "run", progress=False
    )
    assert outcome.failed_cells == 0
    probes = read_results(outcome.path).probes.set_index("probe_id")
    assert (
        probes.loc["q-coffee", "correct"] and "Ritual Roasters" in probes.loc["q-coffee", "reply"]
    )
    assert probes.loc["q-coffee", "evidence_recall"] == 1.0
    prompt = probes.loc["q-coffee", "prompt"]
    assert "- My favourite coffee shop is now Ritual Roasters. (mentioned 2026-02-20)" in prompt
    assert "- My favourite coffee shop is Blue Bottle. (" not in prompt  # no stale observation
    # keep=true: the bank's PostgreSQL data stays in the cell's folder
    kept = list((tmp_path / "run" / "cells").glob("*/hindsight/data/PG_VERSION"))
    assert len(kept) == 1


def _offline_network(tmp_path: Path) -> Path:
    """A Python for Hindsight's worker that runs it in a network namespace of its own, with
    loopback only: any connection beyond this machine fails."""
    wrapper = tmp_path / "python-offline"
    wrapper.write_text(
        '#!/bin/sh\nexec unshare --net sh -c \'ip link set lo up && exec "$0" "$@"\' '
        f'{default_python()} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip"), reason="a network namespace needs root and ip"
)
def test_a_run_writes_nothing_outside_its_folder_and_connects_nowhere(
    coffee, tmp_path, monkeypatch
):
    monkeypatch.setenv("MEMORY_LAB_HINDSIGHT_PYTHON", str(_offline_network(tmp_path)))
    written, remote = run_isolated("hindsight", coffee, tmp_path, monkeypatch)
    assert written == [] and remote == []
    assert list((tmp_path / "run").rglob("hindsight")) == []  # without keep, dropped


FAILING_CONSOLIDATION = """
import importlib.abc, importlib.machinery, sys

class Once(importlib.abc.MetaPathFinder):
    # the first consolidation job fails, as a lost database connection fails it
    def find_spec(self, name, path, target=None):
        if name != "hindsight_api.engine.consolidation":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            job, failed = module.run_consolidation_job, []

            async def flaky(*args, **kwargs):
                if not failed:
                    failed.append(1)
                    raise ConnectionResetError("injected: the connection was lost")
                return await job(*args, **kwargs)

            module.run_consolidation_job = flaky

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Once())
"""


def test_facts_a_failed_consolidation_stranded_are_consolidated_before_the_next_exchange(
    coffee, run_models, tmp_path, monkeypatch
):
    import dataclasses

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAILING_CONSOLIDATION)
    wrapper = tmp_path / "python-failing"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {default_python()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MEMORY_LAB_HINDSIGHT_PYTHON", str(wrapper))
    models = dataclasses.replace(run_models, work_dir=str(tmp_path))
    cell = replayed("hindsight:keep=true", coffee, models)
    log = next((tmp_path / "cells").glob("*/hindsight/worker.log")).read_text()
    assert "injected: the connection was lost" in log  # Hindsight logged it, raised nothing
    assert "fact(s) left unconsolidated by retain: consolidating them" in log
    observations = cell.memory.snapshot()["observations"]
    cell.close()
    healthy = replayed("hindsight", coffee, run_models)
    assert observations == healthy.memory.snapshot()["observations"]  # nothing lost
    healthy.close()


def _hindsight_model(body: dict) -> str:
    """A 'model' behind the mock: Hindsight's calls answered by the offline rules, as JSON."""
    prompt = "\n".join(m["content"] for m in body["messages"])
    title = schema_title(body["messages"][0]["content"])
    return json.dumps(RULES[title](prompt, RuleSettings()))


def test_hindsights_prompts_reach_the_provider_metered_and_a_rerun_is_cached(
    tmp_path, monkeypatch, coffee
):
    runs = run_twice_on_mock("hindsight", coffee, tmp_path, monkeypatch, reply=_hindsight_model)
    assert runs.failed_cells == [0, 0]
    requests, turns = runs.requests, runs.turns
    ours = [r for r in requests if schema_title(r["messages"][0]["content"])]
    # Hindsight's own prompts, in JSON mode, as its OpenAI-compatible provider sends them
    assert ours[0]["messages"][0]["content"].startswith("Extract SIGNIFICANT facts from text.")
    assert all(r["response_format"] == {"type": "json_object"} for r in ours)
    titles = [schema_title(r["messages"][0]["content"]) for r in ours]
    assert titles.count("FactExtractionResponse") == 4  # one per exchange
    assert titles.count("_ConstrainedConsolidationBatchResponse") == 3  # those with a fact
    assert turns["memory_llm_calls"].sum() == len(ours)  # every call metered
    assert (turns.loc[turns["memory_llm_calls"] > 0, "memory_output_tokens"] > 0).all()
    assert runs.again_calls == 0  # the same prompts again (ids included): all from the cache
    assert list(runs.rerun_turns["memory_llm_calls"]) == list(turns["memory_llm_calls"])


CONCURRENT_CALLS = """
import asyncio, importlib.util, random, sys, threading, time
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)

class Channel:  # answers after a random wait, as a model or an embedding does
    def __init__(self):
        self.seen = []
    def call(self, kind, **payload):
        time.sleep(random.random() / 100)
        text = payload["messages"][0]["content"] if kind == "llm" else payload["texts"][0]
        self.seen.append((text, threading.get_ident()))
        if kind == "llm":
            return {"text": "ok", "input_tokens": 1, "output_tokens": 1}
        return [[0.5] * 4 for _ in payload["texts"]]

async def tasks(channel):
    llm = worker._llm_class(channel)("openai", "k", "", "m")
    embeddings = worker._embeddings(channel, 4)
    async def one(i):  # as Hindsight's chunk tasks: created in order, run concurrently
        await asyncio.sleep(0)
        if i % 3 == 0:
            await embeddings.encode_documents([f"task {i}"])
        else:
            await llm.call([{"role": "user", "content": f"task {i}"}])
    await asyncio.gather(*(one(i) for i in range(12)))

for attempt in range(5):
    channel = Channel()
    asyncio.run(tasks(channel))
    print([text for text, _ in channel.seen] == [f"task {i}" for i in range(12)],
          {ident for _, ident in channel.seen} == {threading.main_thread().ident})
print(worker.HINDSIGHT_ENV.get("HINDSIGHT_API_LLM_TRACE_ENABLED"))
"""


def test_hindsights_concurrent_calls_are_answered_in_the_order_its_tasks_run(tmp_path):
    # Hindsight extracts a long exchange's chunks as concurrent tasks. Answered in threads of
    # their own, the calls finished in whichever order the threads took the channel, so the
    # facts reached the id counters and the embedding batches in an order that varied, and a
    # rerun sent other prompts (one BEAM conversation's evidence recall moved by 14 points)
    import subprocess

    from memory_lab.memories.systems.hindsight import worker as hindsight_worker

    script = tmp_path / "concurrent_calls.py"
    script.write_text(CONCURRENT_CALLS)
    done = subprocess.run(
        [str(default_python()), str(script), hindsight_worker.__file__],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # in task order, on the event loop's thread, every time, whatever each answer's wait
    assert done.stdout.split("\n")[:6] == ["True True"] * 5 + ["false"]  # and no timed log


def test_an_unknown_hindsight_schema_fails_naming_it():
    from memory_lab.memories.systems.hindsight.rules import SCHEMA_MARK, HindsightRuleError
    from memory_lab.models.offline_memory import OfflineMemoryModel

    prompt = f"Reflect on the bank.\n\n{SCHEMA_MARK}\n" + json.dumps(
        {"title": "ReflectAnswer", "type": "object", "properties": {}}
    )
    with pytest.raises(HindsightRuleError, match="no rule for Hindsight's response schema 'Refl"):
        OfflineMemoryModel().invoke([("system", prompt), ("human", "Go.")])


def _dedup_prompt(new: str, existing: str) -> str:
    """Hindsight's dedup call as its OpenAI-compatible provider sends it: one user message,
    the schema first (``_DEDUP_PROMPT`` of its consolidator, abridged)."""
    from memory_lab.memories.systems.hindsight.rules import SCHEMA_MARK

    schema = {"title": "_DedupDecision", "type": "object", "properties": {}}
    return (
        f"\n\n{SCHEMA_MARK}\n{json.dumps(schema, indent=2)}\n\n"
        "You reconcile long-term memory observations. A NEW observation is about to be "
        "stored, and it is highly similar to an EXISTING one:\n\n"
        f"[NEW] {new}\n[EXISTING] {existing}\n\n"
        "Respond with ONLY one valid JSON object matching one of these shapes:\n\n"
        'For duplicate facts:\n{"action": "merge", "text": "...", "reason": "..."}'
    )


def test_a_new_observation_restating_one_held_is_merged_and_a_changed_detail_kept():
    from memory_lab.models.offline_memory import OfflineMemoryModel

    def decide(new: str, existing: str) -> dict:
        reply = OfflineMemoryModel().invoke([("human", _dedup_prompt(new, existing))])
        return json.loads(reply.content)

    same = decide("My favourite cafe is Blue Door.", "my favourite cafe is Blue Door")
    assert same["action"] == "merge"
    assert same["text"] == "My favourite cafe is Blue Door."  # the longer wording kept
    changed = decide("My favourite cafe is Red Lamp.", "My favourite cafe is Blue Door.")
    assert changed == {"action": "keep", "text": "", "reason": "they differ in a detail"}


def test_a_killed_worker_s_postgresql_is_stopped_by_the_run_that_started_it(nurse, run_models):
    """A hindsight worker killed with -9 had left its PostgreSQL running after the run ended
    (its parent PID 1, its data folder deleted): closing the cell stops it."""
    import signal

    from memory_lab.memories.systems.hindsight.adapter import _running

    cell = replayed("hindsight", nurse, run_models, upto=1)
    worker = cell.memory.worker
    pid = int((Path(worker.folder) / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(worker.proc.pid, signal.SIGKILL)
    worker.proc.wait()
    assert _running(pid)  # the server outlives its worker
    cell.close()
    assert not _running(pid)
