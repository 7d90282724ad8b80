"""Prompts stored once: deltas against a cell's previous prompt, restored exactly, bad ones
refused."""

from __future__ import annotations

import json
import random

import pytest

from memory_lab.log.prompt_store import (
    DELTA_FIELD,
    PromptDecoder,
    PromptEncoder,
    delta_pieces,
    join_pieces,
    shared_length,
)
from memory_lab.log.record_log import dump_record

HEADER = "The following is a conversation between a human and an AI.\n\nCurrent conversation:\n"
WORDS = ["river", "harbour", "부산", "고양이", "Mochi 🐈", "FastAPI", "port", "budget", "é"]


def text(rng: random.Random, lines: int, words: int = 12) -> str:
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(lines))


def buffer_prompts(exchanges: int, keep: int | None = None) -> list[str]:
    """Prompts of a growing history (``keep``: only its last ``keep`` characters, as a
    context limit cuts the oldest text), with Korean and emoji text (offsets are characters)."""
    rng = random.Random(7)
    history, prompts = "", []
    for _ in range(exchanges):
        user = text(rng, 1)
        shown = history if keep is None else history[-keep:]
        prompts.append(f"{HEADER}{shown}\nHuman: {user}\nAI:")
        history += f"\nHuman: {user}\nAI: {text(rng, 6)}"
    return prompts


def record(prompt: str | None, kind: str = "turn", memory: str = "buffer") -> dict:
    return {"type": kind, "memory": memory, "dialogue": "d", "exchange": 0, "prompt": prompt}


def stored(prompts: list[str | None], kind: str = "turn") -> list[dict]:
    encoder = PromptEncoder()
    return [encoder.encode(record(p, kind)) for p in prompts]


def restored(records: list[dict]) -> list[str | None]:
    decoder = PromptDecoder()
    return [decoder.restore(r).get("prompt") for r in records]


@pytest.mark.parametrize("keep", [None, 3000], ids=["growing", "cut-by-a-limit"])
def test_a_growing_history_is_stored_in_flat_bytes_and_restored_exactly(keep):
    prompts = buffer_prompts(120, keep)
    records = stored(prompts)
    assert restored(records) == prompts
    size = [len(dump_record(r).encode()) for r in records]
    assert DELTA_FIELD not in records[0] and records[0]["prompt"] == prompts[0]
    assert all(DELTA_FIELD in r and "prompt" not in r for r in records[1:])
    early, late = sum(size[1:21]) / 20, sum(size[-20:]) / 20
    assert late < 1.2 * early  # the bytes of a record stay flat ...
    assert len(prompts[-1]) > 3 * len(dump_record(records[-1]))  # ... its prompt does not


def test_prompt_text_of_any_kind_round_trips():
    rng = random.Random(3)
    base = text(rng, 40)
    prompts = [
        base,
        base,  # the same again
        "",  # empty
        base + "\n" + text(rng, 3),
        text(rng, 3) + base,  # new text first, then the old prompt
        base[500:1500] + "가" * 70 + base[2000:],  # copies with a literal between them
        text(rng, 30),  # nothing in common
        "🐈" * 200,
        "🐈" * 100 + "x" + "🐈" * 150,
    ]
    for previous, prompt in zip(prompts, prompts[1:], strict=False):
        assert join_pieces(previous, delta_pieces(previous, prompt)) == prompt
    assert restored(stored(prompts)) == prompts


def test_shared_length_counts_characters_across_slices():
    a = "x" * 100_000 + "ab"
    assert shared_length(a, 0, "x" * 100_000 + "ac", 0) == 100_001
    assert shared_length(a, 5, a, 5) == len(a) - 5
    assert shared_length("abc", 0, "xbc", 0) == 0


def test_records_without_a_prompt_are_left_alone_and_keep_the_previous_prompt():
    prompts = buffer_prompts(4)
    records = stored([prompts[0], None, prompts[1], prompts[2], None, prompts[3]])
    assert records[1] == record(None) and records[4] == record(None)
    assert restored(records) == [prompts[0], None, prompts[1], prompts[2], None, prompts[3]]
    usage = {"type": "usage", "memory": "buffer", "dialogue": "d", "role": "llm"}
    assert PromptEncoder().encode(usage) is usage and PromptDecoder().restore(usage) == usage


def test_probes_and_turns_of_a_cell_share_one_chain_and_cells_are_followed_apart():
    prompts = buffer_prompts(6)
    a, b = PromptEncoder(), PromptEncoder()
    written = []
    for n, prompt in enumerate(prompts):
        kind = "probe" if n % 3 == 2 else "turn"
        written.append(a.encode(record(prompt, kind, "buffer")))
        written.append(b.encode(record(prompt + "!", "turn", "window")))
    decoder = PromptDecoder()
    back = [decoder.restore(r) for r in written]
    assert [r["prompt"] for r in back if r["memory"] == "buffer"] == prompts
    assert [r["prompt"] for r in back if r["memory"] == "window"] == [p + "!" for p in prompts]
    assert all(DELTA_FIELD not in r for r in back)


def test_a_cell_record_ends_the_chain_so_a_second_block_of_the_cell_decodes_on_its_own():
    prompts = buffer_prompts(5)
    block = [*stored(prompts), {"type": "cell", "memory": "buffer", "dialogue": "d"}]
    assert restored(block + block)[6:11] == prompts
    cut_short = stored(prompts)[:3]  # a block a kill cut short, then the cell run again
    assert restored(cut_short + block)[3:8] == prompts


def _delta_record(**delta) -> dict:
    return {"type": "turn", "memory": "buffer", "dialogue": "d", DELTA_FIELD: delta}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [_delta_record(pieces=[[0, 3]], digest="0" * 16)],
            "copies from an earlier prompt of its cell (buffer, d), and no earlier record",
        ),
        (
            [record("abcdef"), _delta_record(pieces=[[0, 3], "x"], digest="0" * 16)],
            "does not restore its prompt from the cell's previous prompt",
        ),
        (
            [record("abcdef"), _delta_record(pieces=[[0, 30]], digest="0" * 16)],
            "does not restore its prompt",
        ),
        ([record("abcdef"), _delta_record(pieces="abc", digest="0")], "must be an object"),
        ([record("abcdef"), _delta_record(pieces=[[3, 1]], digest="0")], "[start, end], got"),
        ([record("abcdef"), _delta_record(pieces=[1.5], digest="0")], "a piece must be text"),
        (
            [{"type": "usage", "memory": "buffer", "dialogue": "d", DELTA_FIELD: {}}],
            "only turn and probe records carry a prompt",
        ),
    ],
)
def test_a_delta_that_does_not_restore_is_refused_naming_the_field(records, message):
    decoder = PromptDecoder()
    with pytest.raises(ValueError) as caught:
        for r in records:
            decoder.restore(r)
    assert f"field '{DELTA_FIELD}'" in str(caught.value) and message in str(caught.value)


def test_a_record_of_another_cell_in_between_does_not_break_the_chain():
    prompts = buffer_prompts(3)
    records = stored(prompts)
    other = record("something else entirely", memory="window")
    decoder = PromptDecoder()
    back = [decoder.restore(r) for r in (records[0], other, records[1], other, records[2])]
    assert [r["prompt"] for r in back] == [prompts[0], other["prompt"], prompts[1]] + [
        other["prompt"],
        prompts[2],
    ]
    assert json.loads(dump_record(records[1]))[DELTA_FIELD]["pieces"][0] == [0, len(prompts[0])]
