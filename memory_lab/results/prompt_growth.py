"""How prompts grow along a dialogue: per memory, the mean prompt tokens at each exchange and
the memory-maintenance tokens spent so far (``prompt_growth``, what the growth chart draws)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from memory_lab.errors import BadInput
from memory_lab.results.read import Results


@dataclass
class PromptGrowth:
    """``dialogue``: the dialogue shown, or ``"all"`` (every dialogue averaged per exchange);
    ``memories``: memory -> a frame indexed by exchange with ``prompt_tokens`` (the mean) and
    ``memory_tokens`` (cumulative), in run order; ``sessions``: session -> its first exchange,
    for every session after the first of one dialogue (empty for ``"all"``)."""

    dialogue: str
    memories: dict[str, pd.DataFrame]
    sessions: dict[Any, int]


def longest_dialogue(results: Results) -> str:
    """The dialogue with the most exchanges among those with recorded turns (a dialogue whose
    every cell failed before its first turn has none); the longest of all if none has any."""
    spec = results.spec
    dialogues = list(spec.dialogues) if spec is not None else []
    recorded = set(results.turns["dialogue"]) if "dialogue" in results.turns else set()
    if dialogues:
        with_turns = [d for d in dialogues if d.id in recorded] or dialogues
        return max(with_turns, key=lambda d: d.turns or 0).id
    return str(results.turns.groupby("dialogue")["exchange"].max().idxmax())


def prompt_growth(results: Results, dialogue: str | None = None) -> PromptGrowth:
    """The growth of one dialogue's prompts (default: the longest), or of every dialogue's
    averaged per exchange index (``"all"``); a ValueError for a dialogue with no turns."""
    turns = results.turns
    name = dialogue or longest_dialogue(results)
    if name != "all":
        turns = turns[turns["dialogue"] == name]
        if turns.empty:
            raise BadInput(f"no turns recorded for dialogue {name!r}")
    memories = {}
    for memory in results.memory_order():
        t = turns[turns["memory"] == memory]
        if t.empty:
            continue
        per = t.groupby("exchange")[["prompt_tokens", "memory_tokens"]].mean().sort_index()
        memories[memory] = per.assign(memory_tokens=per["memory_tokens"].cumsum())
    sessions = {}
    if name != "all" and "session" in turns:
        first = turns.groupby("session")["exchange"].min().sort_values()
        sessions = {session: start for session, start in first.items() if start > 0}
    return PromptGrowth(name, memories, sessions)
