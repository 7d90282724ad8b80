"""Per-turn harness time as dialogues grow: 100, 200, 400 and 800 turns.

For ``window``, ``summary_buffer`` and ``vector`` the time per turn must stay within 1.5x each
time the turn count doubles (no quadratic work hiding in the harness). Prints one row per
(memory, turns) and the ratio to the previous length.

    python benchmarks/scaling.py [--turns 100 200 400 800] [--memory window summary_buffer vector]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

from memory_lab import RunModels, load_dialogues, parse_memory_spec, replay_dialogue

NAMES = ["Mina", "Omar", "Lena", "Kofi", "Sora", "Ivan", "Priya", "Tomas"]
PLACES = ["Lisbon", "Busan", "Oslo", "Lima", "Cairo", "Kyoto", "Quito", "Perth"]
THINGS = ["bike", "laptop", "camera", "guitar", "kettle", "tent", "scooter", "drone"]
CHAT = [
    "The weather has been all over the place this week.",
    "I finally finished that book about the history of maps.",
    "Work was busy, lots of meetings about the new roadmap.",
    "I tried a new recipe with lentils and it was decent.",
    "My neighbour's dog barked all night again.",
]


def synthetic_dialogue(turns: int, seed: int) -> dict:
    """A dialogue of ``turns`` turns mixing facts with chit-chat, deterministic per seed."""
    rng = random.Random(seed)
    items = []
    for i in range(turns // 2):
        if i % 3 == 0:
            user = (
                f"By the way, {rng.choice(NAMES)} lent me a {rng.choice(THINGS)} "
                f"in {rng.choice(PLACES)}, locker {rng.randint(100, 999)}."
            )
        else:
            user = f"{rng.choice(CHAT)} (note {i})"
        items += [{"user": user}, {"assistant": f"Thanks for telling me, noted as item {i}."}]
    return {
        "format": "memory-lab/dialogue@1",
        "id": f"synthetic-{turns}",
        "language": "en",
        "sessions": [{"turns": items}],
        "probes": [],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", nargs="+", type=int, default=[100, 200, 400, 800])
    parser.add_argument("--memory", nargs="+", default=["window", "summary_buffer", "vector"])
    args = parser.parse_args()
    models = RunModels.create(record_prompts=False)
    models.shared_embeddings().embed_query("warm up the model")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.turns:
            Path(tmp, f"s{n}.yaml").write_text(yaml.safe_dump(synthetic_dialogue(n, n)), "utf-8")
        dialogues = {len(d.turns): d for d in load_dialogues(tmp)}
    print(f"{'memory':<16} {'turns':>6} {'ms/turn':>9} {'x prev':>7}")
    worst = 0.0
    for memory in args.memory:
        spec = parse_memory_spec(memory)
        previous = None
        for n in args.turns:
            records: list[dict] = []
            started = time.perf_counter()
            replay_dialogue(spec, dialogues[n], models, records.append)
            per_turn = (time.perf_counter() - started) / n * 1000
            ratio = per_turn / previous if previous else float("nan")
            if previous:
                worst = max(worst, ratio)
            print(f"{memory:<16} {n:>6} {per_turn:>9.2f} {ratio:>7.2f}", flush=True)
            previous = per_turn
    verdict = "OK" if worst <= 1.5 else "OVER TARGET"
    print(f"\nworst ratio on doubling: {worst:.2f} (target <= 1.5): {verdict}")
    return 0 if worst <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
