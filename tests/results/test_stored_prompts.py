"""A run stores each prompt once (a delta against its cell's previous prompt), and every reader
still gets the exact prompt: a long dialogue through ``buffer`` keeps flat record bytes per
exchange, prompts restore to what the memory computes, old runs and resumed runs read the same."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.prompt_store import DELTA_FIELD
from memory_lab.log.record_log import dump_record
from memory_lab.results.read import RECORDS_FILE, read_records
from memory_lab.run.inspect import inspect_memory

EXCHANGES = 40
MEMORIES = ["buffer", "window:k=3"]
WORDS = (
    "the service keeps its queue on port 8080 while the budget review moves to May and "
    "Jisoo owns the deploy scripts near the harbour office in 부산 with Mochi 🐈 asleep"
).split()


def long_dialogue(folder: Path) -> Path:
    """40 exchanges of about 150 words each (replies of several lines), two sessions, and a
    probe in the first and in the last ten exchanges."""
    rng = random.Random(31)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    sessions = []
    for s in range(2):
        turns = []
        for n in range(s * EXCHANGES // 2, (s + 1) * EXCHANGES // 2):
            turns.append({"user": f"Note {n}: code word kiwi{n}. {words(16)}", "id": f"u{n}"})
            reply = "\n".join(f"- {words(26)}" for _ in range(5))
            turns.append({"assistant": reply, "id": f"a{n}"})
        sessions.append({"id": f"s{s + 1}", "date": f"2026-03-0{2 + 7 * s}", "turns": turns})
    probes = [
        {"id": f"p{n}", "after": f"a{n}", "question": f"What was the code word of note {n - 3}?"}
        | {"answers": [f"kiwi{n - 3}"], "evidence": [f"u{n - 3}"], "category": "single-hop"}
        for n in (5, EXCHANGES - 5)
    ]
    document = {
        "format": "memory-lab/dialogue@1",
        "id": "long",
        "title": "A long history",
        "language": "en",
        "sessions": sessions,
        "probes": probes,
    }
    path = folder / "long.json"
    path.write_text(json.dumps(document, ensure_ascii=False), "utf-8")
    return path


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stored-prompts")
    source = str(long_dialogue(folder))
    outcome = run_benchmark(
        resolve_memories(MEMORIES),
        load_dialogues(source),
        folder / "run",
        sources=[source],
        progress=False,
    )
    assert outcome.failed_cells == 0
    return outcome.path


def raw(folder: Path) -> list[dict]:
    """records.jsonl's records as written (its format header left out)."""
    lines = (folder / RECORDS_FILE).read_text("utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] != "format"]


def bytes_per_exchange(folder: Path, memory: str) -> dict[int, int]:
    """The bytes records.jsonl spends on each exchange of ``memory`` (its turn, usage and
    probe records)."""
    out: dict[int, int] = {}
    for line in (folder / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True):
        r = json.loads(line)
        if r.get("memory") == memory and "exchange" in r:
            out[r["exchange"]] = out.get(r["exchange"], 0) + len(line.encode("utf-8"))
    return out


def test_buffer_record_bytes_per_exchange_stay_flat_as_its_prompts_grow(long_run):
    per = bytes_per_exchange(long_run, "buffer")
    assert sorted(per) == list(range(EXCHANGES))
    early = sum(per[n] for n in range(1, 11)) / 10  # the first prompt is stored whole
    late = sum(per[n] for n in range(EXCHANGES - 10, EXCHANGES)) / 10
    assert late / early < 1.3
    turns = read_results(long_run).turns
    prompts = turns[turns["memory"] == "buffer"].sort_values("exchange")["prompt"].str.len()
    assert prompts.iloc[-10:].mean() / prompts.iloc[1:11].mean() > 4  # what was stored whole
    assert sum(DELTA_FIELD in r for r in raw(long_run)) > EXCHANGES  # both cells use deltas


def test_every_restored_prompt_is_the_prompt_the_memory_computes(long_run, run_models):
    dialogue = load_dialogues(str(long_run.parent / "long.json"))[0]
    results = read_results(long_run)
    for memory in MEMORIES:
        turns = results.turns[results.turns["memory"] == memory].sort_values("exchange")
        assert turns["prompt"].notna().all()
        for turn_id, prompt in zip(turns["turn_id"], turns["prompt"], strict=True):
            assert prompt == inspect_memory(memory, dialogue, turn_id, models=run_models).prompt
        probes = results.probes[results.probes["memory"] == memory]
        assert len(probes) == 2
        for probe in dialogue.probes:
            prompt = probes[probes["probe_id"] == probe.id]["prompt"].iloc[0]
            asked = inspect_memory(
                memory, dialogue, probe.after, models=run_models, query=probe.question
            )
            assert prompt == asked.prompt


def test_records_of_a_run_from_before_deltas_read_the_same(long_run, tmp_path):
    """Old runs stored every prompt whole; a file mixing them with delta cells reads too."""
    restored = read_records(long_run)
    assert not any(DELTA_FIELD in r for r in restored)
    for name, records in {
        "old": restored,
        "mixed": [r for r in restored if r["memory"] == "buffer"]
        + [r for r in raw(long_run) if r["memory"] != "buffer"],
    }.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "run.json").write_text((long_run / "run.json").read_text("utf-8"), "utf-8")
        (folder / RECORDS_FILE).write_text("".join(map(dump_record, records)), "utf-8")
        assert read_records(folder) == restored
        again, first = read_results(folder), read_results(long_run)
        assert again.turns["prompt"].tolist() == first.turns["prompt"].tolist()
        assert again.probes["prompt"].tolist() == first.probes["prompt"].tolist()
        assert list(again.turns.columns) == list(first.turns.columns)


def without_timings(records: list[dict]) -> list[dict]:
    from memory_lab.log.records import without_timings as drop

    return [drop(r) for r in records]


@pytest.mark.parametrize("how", ["cut-short", "adopted-part"])
def test_a_resumed_run_stores_and_restores_the_same_prompts(long_run, tmp_path, how):
    """``buffer``'s delta-encoded block is kept as written; ``window``'s is redone after a kill
    cut it short, or adopted from its complete part."""
    lines = (long_run / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True)
    end = next(n for n, x in enumerate(lines) if '"type": "cell"' in x) + 1
    out = tmp_path / "resumed"
    out.mkdir()
    (out / "run.json").write_text((long_run / "run.json").read_text("utf-8"), "utf-8")
    if how == "cut-short":
        (out / RECORDS_FILE).write_text("".join(lines[: end + 30]) + lines[end + 30][:50])
    else:
        (out / RECORDS_FILE).write_text("".join(lines[:end]), "utf-8")
        (out / "parts").mkdir()
        (out / "parts" / "cell-00001.jsonl").write_text("".join(lines[end:]), "utf-8")
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert without_timings(raw(out)) == without_timings(raw(long_run))  # stored alike
    assert without_timings(read_records(out)) == without_timings(read_records(long_run))
    assert (
        read_results(out).probes["prompt"].tolist()
        == read_results(long_run).probes["prompt"].tolist()
    )


def test_a_changed_delta_is_refused_naming_the_file_line_and_field(long_run, tmp_path):
    lines = (long_run / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if DELTA_FIELD in x)
    changed = json.loads(lines[n])
    changed[DELTA_FIELD]["pieces"].append("tampered")
    lines[n] = dump_record(changed)
    (tmp_path / RECORDS_FILE).write_text("".join(lines), "utf-8")
    with pytest.raises(ValueError) as caught:
        read_results(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / RECORDS_FILE} line {n + 1}: ")
    assert f"field '{DELTA_FIELD}' does not restore its prompt" in str(caught.value)


def test_prompts_can_be_read_as_stored_or_left_out(long_run):
    stored, restored = read_records(long_run, prompts="stored"), read_records(long_run)
    assert stored == raw(long_run)
    dropped = read_records(long_run, prompts="dropped")
    carrying = [n for n, r in enumerate(restored) if r["type"] in ("turn", "probe")]
    assert all(dropped[n]["prompt"] is None and DELTA_FIELD not in dropped[n] for n in carrying)
    assert [
        {**r, "prompt": None} if n in carrying else r for n, r in enumerate(restored)
    ] == dropped
    summary_only = read_results(long_run, prompts=False)
    assert summary_only.probes["prompt"].isna().all()
    assert summary_only.turns.drop(columns="prompt").equals(
        read_results(long_run).turns.drop(columns="prompt")
    )
    with pytest.raises(ValueError, match="prompts must be one of restored, dropped, stored"):
        read_records(long_run, prompts="whole")
