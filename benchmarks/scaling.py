"""Per-turn cost as dialogues grow: 100, 200, 400 and 800 turns.

For each memory, per user turn: harness time, and tokens (the prompt plus the memory's own
maintenance tokens). For bounded memories (``window``, ``summary_buffer``, ``vector``,
``hybrid``, ``thread`` with any policy other than ``none``, ``hierarchical``, ``profile``,
``memgpt``, whose core blocks are capped and whose searches return ``k`` results, examining
at most ``scan`` messages per word, ``rag``, which embeds only the chunks an exchange touched,
``langmem``, whose manager searches ``query_limit`` memories per exchange, ``graphiti``,
whose prompts show the last ten episodes and a bounded number of search results, and whose
summaries are capped, and ``hindsight``, whose recall and consolidation prompts fill token
budgets of Hindsight's) both must stay within 1.5x each time the turn count doubles:
no quadratic work hiding in the harness, in a checkpointer, in a growing store or in a search
index. Prints one row per (memory, turns) with the ratios to the previous length. ``--language
ko`` replays Korean dialogues instead (``hybrid`` splits them into morphemes).

    python benchmarks/scaling.py [--turns 100 200 400 800] [--memory window vector hybrid]
    python benchmarks/scaling.py --memory hybrid --language ko
    python benchmarks/scaling.py --memory thread:policy=summarize thread:policy=trim \
        thread:policy=filter thread:policy=summarize,summarizer=langmem
    python benchmarks/scaling.py --memory memgpt
    python benchmarks/scaling.py --memory hierarchical profile
    python benchmarks/scaling.py --memory rag:chunk_tokens=256,k=2 langmem
    python benchmarks/scaling.py --memory graphiti
    python benchmarks/scaling.py --memory hindsight
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
from memory_lab.sweep.growth import step_per_doubling

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
KO_NAMES = ["민지", "준호", "서연", "태윤", "하나", "지민", "수아", "도현"]
KO_PLACES = ["부산", "대전", "광주", "제주", "수원", "강릉", "전주", "춘천"]
KO_THINGS = ["자전거", "노트북", "카메라", "기타", "주전자", "텐트", "킥보드", "드론"]
KO_CHAT = [
    "이번 주는 날씨가 정말 오락가락했어요.",
    "지도의 역사에 관한 책을 드디어 다 읽었어요.",
    "회사에서 새 로드맵 회의가 많아서 바빴어요.",
    "렌틸콩으로 새 요리를 해 봤는데 괜찮았어요.",
    "옆집 강아지가 밤새 또 짖었어요.",
]


def synthetic_dialogue(turns: int, seed: int, language: str = "en") -> dict:
    """A dialogue of ``turns`` turns mixing facts with chit-chat, deterministic per seed."""
    rng = random.Random(seed)
    items = []
    for i in range(turns // 2):
        if language == "ko" and i % 3 == 0:
            user = (
                f"참, {rng.choice(KO_NAMES)} 씨가 {rng.choice(KO_PLACES)}에서 "
                f"{rng.choice(KO_THINGS)}를 빌려줬어요. 사물함 {rng.randint(100, 999)}번이에요."
            )
        elif language == "ko":
            user = f"{rng.choice(KO_CHAT)} (메모 {i})"
        elif i % 3 == 0:
            user = (
                f"By the way, {rng.choice(NAMES)} lent me a {rng.choice(THINGS)} "
                f"in {rng.choice(PLACES)}, locker {rng.randint(100, 999)}."
            )
        else:
            user = f"{rng.choice(CHAT)} (note {i})"
        if language == "ko":
            reply = f"알려 주셔서 고마워요, {i}번으로 적어 둘게요."
        else:
            reply = f"Thanks for telling me, noted as item {i}."
        items += [{"user": user}, {"assistant": reply}]
    return {
        "format": "memory-lab/dialogue@1",
        "id": f"synthetic-{turns}",
        "language": language,
        "sessions": [{"turns": items}],
        "probes": [],
    }


def turn_tokens(records: list[dict]) -> float:
    """Mean tokens per user turn: the prompt plus the memory's own maintenance tokens, over the
    turn records that had a prompt."""
    turns = [r for r in records if r["type"] == "turn" and r["prompt_tokens"]]
    return sum(r["prompt_tokens"] + r["memory_tokens"] for r in turns) / len(turns)


def verdict(worst: float, target: float = 1.5) -> int:
    """Print the worst ratio on doubling against ``target``; the exit status (1: over it)."""
    shown = "OK" if worst <= target else "OVER TARGET"
    print(f"\nworst ratio on doubling: {worst:.2f} (target <= {target}): {shown}")
    return 0 if worst <= target else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", nargs="+", type=int, default=[100, 200, 400, 800])
    parser.add_argument(
        "--memory", nargs="+", default=["window", "summary_buffer", "vector", "hybrid"]
    )
    parser.add_argument("--language", choices=["en", "ko"], default="en")
    args = parser.parse_args()
    models = RunModels.create(record_prompts=False)
    models.shared_embeddings().embed_query("warm up the model")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.turns:
            Path(tmp, f"s{n}.yaml").write_text(
                yaml.safe_dump(synthetic_dialogue(n, n, args.language)), "utf-8"
            )
        dialogues = {len(d.turns): d for d in load_dialogues(tmp)}
    width = max(16, *(len(m) for m in args.memory))
    print(f"{'memory':<{width}} {'turns':>6} {'ms/turn':>9} {'x prev':>7} {'tokens/turn':>12} "
          f"{'x prev':>7}")  # fmt: skip
    worst = 0.0
    for memory in args.memory:
        spec = parse_memory_spec(memory)
        previous = None
        for n in args.turns:
            records: list[dict] = []
            started = time.perf_counter()
            replay_dialogue(spec, dialogues[n], models, records.append)
            per_turn = (time.perf_counter() - started) / n * 1000
            tokens = turn_tokens(records)
            if previous:  # each scaled to one doubling of the turns
                ratios = (
                    step_per_doubling(per_turn, (previous[0], previous[2]), n) or 1.0,
                    step_per_doubling(tokens, (previous[1], previous[2]), n) or 1.0,
                )
                worst = max(worst, *ratios)
                shown = f"{ratios[0]:>7.2f} {tokens:>12.0f} {ratios[1]:>7.2f}"
            else:
                shown = f"{'':>7} {tokens:>12.0f} {'':>7}"
            print(f"{memory:<{width}} {n:>6} {per_turn:>9.2f} {shown}", flush=True)
            previous = (per_turn, tokens, n)
    return verdict(worst)


if __name__ == "__main__":
    sys.exit(main())
