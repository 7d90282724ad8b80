"""Full-scale LoCoMo replay with the offline models: wall time, --jobs speed-up, peak memory.

Generates synthetic data in the LoCoMo format at the real dataset's size (10 conversations,
about 5,900 turns, about 2,000 questions, about 14,000 tokens per conversation), imports it with
``locomo:PATH`` like real data, and replays it through the five classic memories.
Target: under 15 minutes with ``--jobs 2`` on a 2-core machine, peak memory under 4 GiB.

    python benchmarks/locomo_scale.py                  # --jobs 2 on the full set
    python benchmarks/locomo_scale.py --speedup 2      # also time --jobs 1 vs 2 on 2 conversations
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from memory_lab import load_dialogues, resolve_memories, run_benchmark
from memory_lab.models.tokens import count_tokens
from memory_lab.results import format_summary, read_results

PEOPLE = ["Caroline", "Melanie", "Jon", "Gina", "Tim", "John", "Maria", "Joanna", "Nate", "Audrey"]
PLACES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Bergen", "Cusco", "Hanoi", "Perth"]
ACTIVITIES = [
    "pottery",
    "rock climbing",
    "painting",
    "a charity run",
    "a cooking class",
    "volunteering",
    "a book club",
    "salsa dancing",
    "birdwatching",
    "a coding bootcamp",
]
PETS = ["Oliver", "Luna", "Biscuit", "Mochi", "Pepper", "Shadow", "Ziggy", "Nala"]
FILLER = [
    "That sounds like a lot of fun, I'm glad you had a good time!",
    "Work has been hectic lately but I'm trying to keep a balance.",
    "I've been thinking a lot about what really matters to me this year.",
    "The kids kept me busy all weekend, as usual.",
    "I really appreciate you always being there to listen.",
    "We should catch up properly soon, maybe over coffee.",
    "Honestly the weather has been so unpredictable this month.",
    "I read an article about that yesterday, it was really eye-opening.",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def conversation(index: int, sessions: int, turns_per_session: int, questions: int) -> dict:
    """One LoCoMo record of synthetic but realistic shape."""
    rng = random.Random(index)
    a, b = rng.sample(PEOPLE, 2)
    conv: dict = {"speaker_a": a, "speaker_b": b}
    facts = []
    for s in range(1, sessions + 1):
        day, month = rng.randint(1, 28), MONTHS[(s + index) % 12]
        conv[f"session_{s}_date_time"] = (
            f"{rng.randint(1, 12)}:{rng.randint(10, 59)} pm on {day} {month}, 2023"
        )
        turns = []
        for t in range(1, turns_per_session + 1):
            speaker = a if t % 2 else b
            dia_id = f"D{s}:{t}"
            if rng.random() < 0.35:
                kind = rng.choice(["place", "activity", "pet", "number"])
                if kind == "place":
                    value = rng.choice(PLACES)
                    text = (
                        f"Last week I finally went to {value} for a few days, it was "
                        "wonderful and the food was amazing."
                    )
                elif kind == "activity":
                    value = rng.choice(ACTIVITIES)
                    text = f"I started {value} recently and I'm really enjoying it so far."
                elif kind == "pet":
                    value = rng.choice(PETS)
                    text = f"Our new puppy is called {value} and he chews everything in sight."
                else:
                    value = str(rng.randint(3, 95))
                    text = f"We raised {value} hundred dollars at the community fundraiser."
                facts.append((kind, value, speaker, dia_id, day, month))
            else:
                text = " ".join(rng.sample(FILLER, 2))
            turn = {"speaker": speaker, "dia_id": dia_id, "text": text}
            if rng.random() < 0.03:
                turn["img_url"] = ["https://example.invalid/photo.jpg"]
                turn["blip_caption"] = "a photo of a sunset over the water"
            turns.append(turn)
        conv[f"session_{s}"] = turns
    qa = []
    for _ in range(questions):
        kind, value, speaker, dia_id, day, month = rng.choice(facts)
        category = rng.choice([1, 2, 2, 3, 4, 4, 4, 5])
        ask = {
            "place": f"Where did {speaker} travel to?",
            "activity": f"What hobby did {speaker} pick up?",
            "pet": f"What is the name of {speaker}'s puppy?",
            "number": f"How much did {speaker} raise at the fundraiser, in hundreds of dollars?",
        }[kind]
        if category == 2:
            qa.append(
                {
                    "question": f"When did {speaker} mention this: {ask}",
                    "answer": f"{day} {month} 2023",
                    "evidence": [dia_id],
                    "category": 2,
                }
            )
        elif category == 5:
            qa.append(
                {
                    "question": ask.replace(speaker, b if speaker == a else a),
                    "adversarial_answer": value,
                    "evidence": [dia_id],
                    "category": 5,
                }
            )
        else:
            qa.append(
                {"question": ask, "answer": value, "evidence": [dia_id], "category": category}
            )
    return {"sample_id": f"conv-{index + 1}", "conversation": conv, "qa": qa}


def write_dataset(folder: Path, conversations: int) -> Path:
    """locomo10.json at the real size: 10 x (25 sessions x ~24 turns), ~200 questions each."""
    data = [
        conversation(i, sessions=25, turns_per_session=24, questions=200)
        for i in range(conversations)
    ]
    path = folder / "locomo_synthetic.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def peak_rss_gib() -> tuple[float, float]:
    """(this process, the largest child process) peak resident memory in GiB."""
    to_gib = 1 / (1024 * 1024)  # ru_maxrss is in KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * to_gib
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * to_gib
    return own, child


def timed_run(source: str, jobs: int, out: Path, memories: list[str]) -> float:
    started = time.perf_counter()
    outcome = run_benchmark(
        resolve_memories(memories),
        load_dialogues(source),
        out,
        sources=[source],
        jobs=jobs,
        record_prompts=False,
    )
    wall = time.perf_counter() - started
    print(format_summary(outcome.summary, read_results(outcome.path).run))
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--memory", nargs="+", default=["all"])
    parser.add_argument(
        "--speedup",
        type=int,
        default=0,
        metavar="N",
        help="also time --jobs 1 and --jobs 2 on N conversations",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        path = write_dataset(tmpdir, args.conversations)
        dialogues = load_dialogues(f"locomo:{path}")
        turns = sum(len(d.turns) for d in dialogues)
        probes = sum(len(d.probes) for d in dialogues)
        tokens = sum(count_tokens("\n".join(t.text for t in d.turns)) for d in dialogues)
        print(
            f"dataset: {len(dialogues)} conversations, {turns} turns, {probes} questions, "
            f"{tokens / len(dialogues):,.0f} tokens per conversation"
        )
        wall = timed_run(f"locomo:{path}", args.jobs, tmpdir / "full", args.memory)
        own, child = peak_rss_gib()
        print(f"\nfull run, --jobs {args.jobs}: {wall:.0f} s wall (target: under 900 s)")
        print(
            f"peak memory: parent {own:.2f} GiB, largest worker {child:.2f} GiB, "
            f"upper bound {own + args.jobs * child:.2f} GiB (target: under 4 GiB)"
        )
        if args.speedup:
            (tmpdir / "small").mkdir()
            small = write_dataset(tmpdir / "small", args.speedup)
            times = {
                j: timed_run(f"locomo:{small}", j, tmpdir / f"s{j}", args.memory) for j in (1, 2)
            }
            print(
                f"\nspeed-up of --jobs 2 over --jobs 1 on {args.speedup} conversations: "
                f"{times[1]:.0f} s / {times[2]:.0f} s = {times[1] / times[2]:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
