"""Growth per doubling of history: each exchange's seconds and maintenance tokens by the tokens
of history before it.

Every turn a run recorded (its cells finished or not: a failed cell's records, and the part
files of a run that died) is put in a doubling band by the history before its exchange
(12.5K-25K, 25K-50K, ... 800K-1.6M tokens); the band's means, the ratio between successive
bands, and the ratio per doubling that a least-squares line through the bands' means on log-log
axes gives. Flat is a ratio near 1; a memory whose every exchange rereads the whole history
approaches 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

FIRST_BAND = 12_500  # tokens of history where the first doubling band starts
# memory -> band -> (exchanges, mean seconds, mean maintenance tokens)
Bands = dict[str, dict[int, tuple[int, float, float]]]


def band_of(history: int, first: int = FIRST_BAND) -> int:
    """The doubling band of a history length: 0 for [12.5K, 25K), 1 for [25K, 50K), ...;
    -1 below 12.5K (too short to say anything about growth)."""
    if history < first:
        return -1
    return int(math.floor(math.log2(history / first)))


def band_label(band: int, first: int = FIRST_BAND) -> str:
    low, high = first * 2**band, first * 2 ** (band + 1)

    def k(x: float) -> str:
        return f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}K" if x >= 1e3 else f"{x:g}"

    return f"{k(low)}-{k(high)}"


def per_doubling(means: dict[int, float]) -> float:
    """The ratio per doubling of history of a least-squares line through ``log2(mean)`` over
    the bands (consecutive bands are one doubling apart); NaN with fewer than two positive
    means."""
    points = [(b, math.log2(m)) for b, m in sorted(means.items()) if m > 0]
    if len(points) < 2:
        return math.nan
    xs, ys = zip(*points, strict=True)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return float(2**slope)


def step_per_doubling(
    value: float, previous: tuple[float, float] | None, size: float
) -> float | None:
    """``value`` against the previous size's (``previous``: its value and its size), scaled to
    one doubling of the size (``r ** (1 / log2(size / previous size))``); None without a
    previous value or when the size did not grow."""
    if previous is None or not previous[0]:
        return None
    doublings = math.log2(size / previous[1])
    return (value / previous[0]) ** (1 / doublings) if doublings > 0 else None


def history_before(texts_per_exchange: Iterable[int]) -> list[int]:
    """The history's tokens before each exchange, from each exchange's own tokens."""
    seen, found = 0, []
    for tokens in texts_per_exchange:
        found.append(seen)
        seen += tokens
    return found


def exchange_history(folder: Path) -> dict[tuple[str, int], int]:
    """(dialogue, exchange) -> the history's tokens before that exchange, for the dialogues
    the run in ``folder`` recorded (from their recorded sources)."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.models.tokens import count_tokens
    from memory_lab.run.exchanges import exchanges

    recorded = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    ids = {d["id"] for d in recorded["dialogues"]}
    found: dict[tuple[str, int], int] = {}
    for spec in dict.fromkeys(d["source"] for d in recorded["dialogues"]):
        for dialogue in load_dialogues(spec):
            if dialogue.id not in ids:
                continue
            seen = [count_tokens(e.user) + count_tokens(e.assistant) for e in exchanges(dialogue)]
            for i, before in enumerate(history_before(seen)):
                found[(dialogue.id, i)] = before
    return found


def turn_records(folder: Path) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Every turn record of ``folder``, its cells finished or not, and (memory, dialogue) ->
    how each cell that did not finish ended: the records of failed cells (``records.jsonl``
    keeps them) and of the part files of cells still running or that a run that died left
    behind (``parts/*.partial``; a resume deletes them), so a system that fails at some length
    still shows how its cost grew up to there."""
    from memory_lab.results.read import read_records

    turns, ended = [], {}
    for r in read_records(folder, prompts="dropped"):
        if r.get("type") == "turn":
            turns.append(r)
        elif r.get("type") == "cell" and r.get("status") != "ok":
            ended[(r["memory"], r["dialogue"])] = f"failed: {str(r.get('error'))[:80]}"
    for part in sorted((folder / "parts").glob("*.partial")):
        with part.open(encoding="utf-8") as fh:
            found = [json.loads(line) for line in fh if line.strip().endswith("}")]
        found = [r for r in found if r.get("type") == "turn"]
        if found:
            turns.extend(found)
            key = (found[-1]["memory"], found[-1]["dialogue"])
            last = found[-1]["exchange"]
            ended[key] = f"unfinished (a part file of a run still going or one that died) at {last}"
    return turns, ended


def growth(
    folders: Iterable[Path], first: int = FIRST_BAND
) -> tuple[Bands, dict[tuple[str, str], str]]:
    """memory -> band -> (exchanges, mean seconds, mean maintenance tokens) over every turn
    recorded in ``folders``; and the cells that did not finish, with how they ended."""
    bands: dict[str, dict[int, list[tuple[float, float]]]] = {}
    unfinished: dict[tuple[str, str], str] = {}
    for folder in folders:
        history = exchange_history(folder)
        turns, ended = turn_records(folder)
        unfinished.update(ended)
        for t in turns:
            band = band_of(history.get((t["dialogue"], int(t["exchange"])), 0), first)
            if band >= 0:
                seconds, tokens = float(t.get("seconds") or 0.0), float(t.get("memory_tokens") or 0)
                bands.setdefault(t["memory"], {}).setdefault(band, []).append((seconds, tokens))
    means = {
        memory: {
            b: (len(v), sum(s for s, _ in v) / len(v), sum(t for _, t in v) / len(v))
            for b, v in sorted(found.items())
        }
        for memory, found in bands.items()
    }
    return means, unfinished
