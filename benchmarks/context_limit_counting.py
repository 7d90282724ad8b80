"""The context limit's token counting over a growing buffer text: plain ``count_tokens`` and
``token_ids`` of the whole text at every exchange (as ``PromptMemory`` did before issue 47)
against ``TextTokens``, checking both give the same counts, cut text and cut tokens.

    python benchmarks/context_limit_counting.py "beam:BEAM/chats#scale=100K,conversations=1" \
        --limit 30000

Prints the median and total milliseconds per exchange of each way, by text length.
"""

from __future__ import annotations

import argparse
import statistics
import time

from memory_lab.dialogue.sources import load_dialogues
from memory_lab.models.tokens import TextTokens, count_tokens, encoding, token_ids


def cut(text: str, budget: int, count, ids) -> tuple[str, bool, int]:
    """The limit's cut as ``PromptMemory.load_memory_variables`` makes it."""
    whole = count(text)
    if whole <= budget:
        return text, False, 0
    all_ids = ids(text)
    kept = encoding().decode(all_ids[len(all_ids) - max(0, budget) :]) if budget > 0 else ""
    at = kept.find("\n")
    kept = kept[at + 1 :] if at != -1 else ""
    return kept, True, whole - count(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default="builtin:classic")
    parser.add_argument("--limit", type=int, default=30000, help="token budget of the context")
    args = parser.parse_args()
    rows = []
    for dialogue in load_dialogues(args.source):
        lines, tokens = [], TextTokens()
        who = {"user": "Human", "assistant": "AI"}
        for turn in dialogue.turns:
            lines.append(f"{who.get(turn.role, turn.role)}: {turn.text}")
            if turn.role != "assistant":
                continue
            text = "\n".join(lines)
            # TextTokens first: it meets the new lines uncached, the plain way then finds them
            # in the per-line cache (as it did in a cell, where only the new lines were new)
            started = time.perf_counter()
            fast = cut(text, args.limit, tokens.count, tokens.token_ids)
            middle = time.perf_counter()
            plain = cut(text, args.limit, count_tokens, token_ids)
            ended = time.perf_counter()
            assert plain == fast, (dialogue.id, len(text))
            rows.append((len(text), ended - middle, middle - started))
    print(f"{len(rows)} exchanges, results identical")
    for low, high in ((0, 100_000), (100_000, 300_000), (300_000, 10**9)):
        band = [r for r in rows if low <= r[0] < high]
        if band:
            print(
                f"{low // 1000}K-{min(high, max(r[0] for r in band)) // 1000}K chars, "
                f"{len(band)} exchanges: median ms plain "
                f"{statistics.median(r[1] for r in band) * 1e3:.1f}, TextTokens "
                f"{statistics.median(r[2] for r in band) * 1e3:.1f}; total s "
                f"{sum(r[1] for r in band):.2f} -> {sum(r[2] for r in band):.2f}"
            )


if __name__ == "__main__":
    main()
