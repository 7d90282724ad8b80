"""A cell counts its prompts' and contexts' tokens by what they grew (``CellCounts``): every
record says what ``count_tokens`` says of the prompt and context it holds."""

from __future__ import annotations

import random

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.models.prompt import split_prompt
from memory_lab.models.tokens import count_tokens
from memory_lab.run.probe_record import CellCounts


def test_interleaved_growing_prompts_count_as_count_tokens_counts_them():
    rng = random.Random(7)
    counts, history = CellCounts(), ""
    words = ["Busan", "flour", "\n", "가게", "2026-03-09", " ", "ok.", "Human:", "😀", "x" * 40]
    for _ in range(300):
        history += "".join(rng.choice(words) for _ in range(rng.randint(1, 60)))
        question = "".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        prompt = f"Header.\n{history}\nHuman: {question}\nAI:"
        assert counts.prompts.count(prompt) == count_tokens(prompt)
        cut = history[rng.randint(0, len(history)) :]
        assert counts.contexts.count(cut) == count_tokens(cut)


def test_every_record_holds_the_tokens_of_its_own_prompt_and_context(tmp_path):
    dialogues = load_dialogues("builtin:classic")[:2]
    out = tmp_path / "run"
    run_benchmark(resolve_memories(["buffer", "window:k=2"]), dialogues, out, progress=False)
    results = read_results(out)
    rows = [*results.turns.to_dict("records"), *results.probes.to_dict("records")]
    rows = [r for r in rows if isinstance(r["prompt"], str)]
    assert len(rows) > 100
    for r in rows:
        assert r["prompt_tokens"] == count_tokens(r["prompt"]), r["memory"]
        assert r["context_tokens"] == count_tokens(split_prompt(r["prompt"])[0]), r["memory"]
