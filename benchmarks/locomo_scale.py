"""LoCoMo at full scale with the offline models: wall time, peak memory of all processes, hot spots.

Generates synthetic conversations in the LoCoMo JSON format with the real release's statistics
(sessions per conversation, turns per session, words and sentences per turn, vocabulary size and
word-frequency slope, image captions, questions per conversation, categories, evidence ids,
session dates), imports them with ``locomo:PATH`` like real data and replays them through the
memories as ``memory-lab run`` does, in a child process whose whole process tree is sampled for
resident memory. With ``--data PATH`` (the real ``locomo10.json`` or its zip) it measures the real
file the same way and prints both side by side, so the synthetic figures stay honest.

    python benchmarks/locomo_scale.py                          # synthetic, five classic memories
    python benchmarks/locomo_scale.py --data locomo10.zip      # synthetic and real, side by side
    python benchmarks/locomo_scale.py --conversations 2 --memory buffer vector
    python benchmarks/locomo_scale.py --speedup 2              # also --jobs 1 against --jobs 2

Targets (issue 13): under 5 minutes wall and 3 GiB peak resident memory summed over all
processes with ``--jobs 2``; a ``buffer`` probe over a 15K-token context under 50 ms; ``vector``
under 10 ms per exchange. The machine's load average is printed: on a shared machine wall
figures are only comparable at equal load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from bisect import bisect_left
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab.dialogue.sources import load_dialogues  # noqa: E402
from memory_lab.models.tokens import count_tokens  # noqa: E402
from memory_lab.sweep.sampler import measure as measure_command  # noqa: E402

CLASSIC_FIVE = ["buffer", "window", "summary", "summary_buffer", "vector"]

# --------------------------------------------------------------------------------------------
# Summary statistics of the LoCoMo release (locomo10: 10 conversations, 5,882 turns, 1,986
# questions; Maharana et al., ACL 2024), measured from the file itself for this generator. Only
# these numbers are kept: no text of the dataset (CC BY-NC 4.0) is used or shipped here.
SESSIONS_PER_CONVERSATION = (30, 25, 30, 31, 28, 29, 29, 32, 19, 19)
QUESTIONS_PER_CONVERSATION = (204, 196, 239, 190, 158, 242, 260, 193, 199, 105)
# (quantile, value) pairs; values between them are interpolated
TURNS_PER_SESSION = ((0.0, 10), (0.1, 15), (0.25, 17), (0.5, 20), (0.75, 24), (0.9, 31), (1.0, 47))
WORDS_PER_TURN = (
    (0.0, 1),
    (0.05, 7),
    (0.1, 9),
    (0.25, 14),
    (0.5, 20),
    (0.75, 30),
    (0.9, 40),
    (0.95, 47),
    (0.99, 61),
    (1.0, 87),
)
SENTENCES_PER_TURN = {1: 553, 2: 1764, 3: 2040, 4: 969, 5: 366, 6: 145, 7: 34, 8: 9}
VOCABULARY = 5524  # distinct lower-cased words
ZIPF_EXPONENT = 1.28  # slope of log frequency against log rank, top 2,000 words
IMAGE_SHARE = 0.208  # turns that share a photo (img_url and blip_caption)
CAPTION_WORDS = ((0.0, 8), (0.1, 11), (0.5, 12), (0.9, 15), (1.0, 20))
QUESTION_WORDS = ((0.0, 4), (0.1, 6), (0.5, 10), (0.9, 14), (1.0, 24))
ANSWER_WORDS = ((0.0, 1), (0.1, 1), (0.5, 3), (0.9, 10), (1.0, 16))
CATEGORIES = {4: 841, 5: 446, 2: 321, 1: 282, 3: 96}  # LoCoMo category id -> questions
EVIDENCE_PER_QUESTION = {1: 1559, 2: 239, 3: 83, 4: 58, 5: 20, 7: 7}
DERIVED_SHARE = 0.52  # answers not verbatim in their evidence (1,024 of 1,985 imported)
SESSION_GAP_DAYS = ((0.0, 1), (0.1, 2), (0.5, 6), (0.9, 17), (1.0, 40))
# --------------------------------------------------------------------------------------------

NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Tim", "John", "Maria", "Joanna", "Nate", "Audrey"]
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def _quantile(rng: random.Random, table: tuple[tuple[float, float], ...]) -> int:
    """A draw from the distribution given by (quantile, value) pairs, linearly interpolated."""
    u = rng.random()
    qs = [q for q, _ in table]
    i = max(1, bisect_left(qs, u))
    (q0, v0), (q1, v1) = table[i - 1], table[i]
    return max(1, round(v0 + (v1 - v0) * (u - q0) / max(q1 - q0, 1e-9)))


def _weighted(rng: random.Random, counts: dict[int, int]) -> int:
    return rng.choices(list(counts), weights=list(counts.values()))[0]


def vocabulary(size: int = round(VOCABULARY * 1.7)) -> list[str]:
    """Words by frequency rank: general English function words first, then made-up words.

    The pool is larger than the vocabulary to reach: a Zipf draw of LoCoMo's length sees only
    part of its pool's tail (1.7x gives LoCoMo's count of distinct words, measured).
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    rng = random.Random(13)
    words = sorted(ENGLISH_STOP_WORDS, key=lambda w: (len(w), w))[:150]
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Generator:
    """Draws LoCoMo-shaped conversations; deterministic for a seed."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.words = vocabulary()
        ranks = range(1, len(self.words) + 1)
        self.cumulative = list(_cumulate(r**-ZIPF_EXPONENT for r in ranks))

    def word(self) -> str:
        return self.words[bisect_left(self.cumulative, self.rng.random() * self.cumulative[-1])]

    def sentence(self, n: int, names: list[str]) -> str:
        words = [self.word() for _ in range(n)]
        if n > 3 and self.rng.random() < 0.3:
            words[self.rng.randrange(1, n)] = self.rng.choice(names)
        end = self.rng.choices([".", "!", "?"], weights=[70, 15, 15])[0]
        return " ".join(words).capitalize() + end

    def turn_text(self, names: list[str]) -> str:
        total = _quantile(self.rng, WORDS_PER_TURN)
        parts = max(1, min(_weighted(self.rng, SENTENCES_PER_TURN), total // 3 or 1))
        sizes = [total // parts + (i < total % parts) for i in range(parts)]
        return " ".join(self.sentence(max(1, n), names) for n in sizes)

    def conversation(self, index: int) -> dict:
        rng = self.rng
        a, b = NAMES[(2 * index) % len(NAMES)], NAMES[(2 * index + 1) % len(NAMES)]
        conv: dict = {"speaker_a": a, "speaker_b": b}
        when = datetime(2023, 1, 1) + timedelta(days=rng.randrange(300), minutes=rng.randrange(999))
        turns: list[dict] = []
        sessions = SESSIONS_PER_CONVERSATION[index % len(SESSIONS_PER_CONVERSATION)]
        for s in range(1, sessions + 1):
            when += timedelta(days=_quantile(rng, SESSION_GAP_DAYS), minutes=rng.randrange(600))
            stamp = when.strftime("%I:%M %p on %d %B, %Y").lstrip("0").replace(" 0", " ")
            conv[f"session_{s}_date_time"] = stamp.replace("AM", "am").replace("PM", "pm")
            session = []
            for t in range(1, _quantile(rng, TURNS_PER_SESSION) + 1):
                turn = {
                    "speaker": a if t % 2 else b,
                    "dia_id": f"D{s}:{t}",
                    "text": self.turn_text([a, b]),
                }
                if rng.random() < IMAGE_SHARE:
                    turn["img_url"] = ["https://example.invalid/photo.jpg"]
                    turn["blip_caption"] = "a photo of " + " ".join(
                        self.word() for _ in range(_quantile(rng, CAPTION_WORDS) - 3)
                    )
                session.append(turn)
                turns.append({**turn, "date": when.strftime("%d %B %Y").lstrip("0")})
            conv[f"session_{s}"] = session
        count = QUESTIONS_PER_CONVERSATION[index % len(QUESTIONS_PER_CONVERSATION)]
        qa = [self.question(turns) for _ in range(count)]
        return {"sample_id": f"conv-{index + 1}", "conversation": conv, "qa": qa}

    def question(self, turns: list[dict]) -> dict:
        rng = self.rng
        category = _weighted(rng, CATEGORIES)
        n = min(_weighted(rng, EVIDENCE_PER_QUESTION), len(turns))
        start = rng.randrange(len(turns) - n + 1)
        evidence = sorted(rng.sample(turns[start : start + 40], n), key=turns.index)
        text = " ".join(t["text"] for t in evidence)
        content = [w.strip(".!?").lower() for w in text.split() if len(w.strip(".!?")) > 3]
        content = content or [self.word()]
        size = min(_quantile(rng, ANSWER_WORDS), len(content))
        at = rng.randrange(len(content) - size + 1)
        if category == 2:
            answer = evidence[0]["date"]
        elif rng.random() < DERIVED_SHARE:
            answer = " ".join(self.word() for _ in range(size))  # not verbatim in the evidence
        else:
            answer = " ".join(content[at : at + size])
        others = [w for w in content if w not in answer.split()] or [self.word()]
        asked = [rng.choice(others) for _ in range(max(1, _quantile(rng, QUESTION_WORDS) - 4))]
        speaker = evidence[0]["speaker"]
        question = f"What did {speaker} say about {' '.join(asked)}?"
        item = {"question": question, "evidence": [t["dia_id"] for t in evidence]}
        if category == 5:
            item["adversarial_answer"] = answer
        else:
            item["answer"] = answer
        item["category"] = category
        return item


def _cumulate(values):
    total = 0.0
    for v in values:
        total += v
        yield total


def write_dataset(folder: Path, conversations: int, seed: int = 0) -> Path:
    """A locomo10-shaped JSON file of ``conversations`` synthetic conversations."""
    generator = Generator(seed)
    data = [generator.conversation(i) for i in range(conversations)]
    path = folder / "locomo_synthetic.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def real_subset(path: Path, folder: Path, args: argparse.Namespace) -> Path:
    """``path`` itself, or its first ``--conversations`` records in a temporary file (deleted
    with the run's temporary folder: no text of the dataset is kept)."""
    from memory_lab.benchmarks.locomo.importer import _samples

    samples = _samples(path)
    if args.conversations >= len(samples):
        return path
    subset = folder / "locomo_subset.json"
    subset.write_text(json.dumps([record for _, record in samples[: args.conversations]]))
    return subset


# ------------------------------------------------------------------------------- measurement
def dataset_figures(source: str, conversations: int | None) -> dict[str, float]:
    import re

    dialogues = load_dialogues(source)[:conversations]
    turns = [t.text.split(": ", 1)[-1] for d in dialogues for t in d.turns]
    vocab = {w.lower() for t in turns for w in re.findall(r"[A-Za-z']+", t)}
    return {
        "conversations": len(dialogues),
        "turns": len(turns),
        "questions": sum(len(d.probes) for d in dialogues),
        "tokens per conversation": statistics.mean(
            count_tokens("\n".join(t.text for t in d.turns)) for d in dialogues
        ),
        "words per turn (median)": statistics.median(len(t.split()) for t in turns),
        "vocabulary (words)": len(vocab),
    }


def measure(source: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    """Run ``memory-lab run`` on ``source`` in a child process; wall time, peak RSS, timings."""
    command = [sys.executable, "-m", "memory_lab.cli", "run", "--dialogues", source]
    command += ["--memory", *args.memory, "--jobs", str(args.jobs), "--out", str(out)]
    # a fresh cache per measurement: cold, shared by the workers (--no-cache for none at all)
    cache_dir = out.parent / f"{out.name}-cache"
    cache = ["--no-cache"] if args.no_cache else ["--cache-dir", str(cache_dir)]
    command += ["--no-prompts", "--quiet", *cache]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    measured = measure_command(command, env=env, interval=0.25, stdout=subprocess.DEVNULL)
    if measured.exit_code != 0:
        raise SystemExit(f"memory-lab run failed on {source} (exit {measured.exit_code})")
    wall, peak, load_before = measured.wall, measured.peak_rss, measured.load[0]
    figures = {"wall time (s)": wall, "peak RSS, all processes (GiB)": peak / 2**30}
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    context: dict[str, int] = defaultdict(int)
    with open(out / "records.jsonl", encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["type"] in ("turn", "probe"):
                seconds[(record["memory"], record["type"])].append(record["seconds"] or 0.0)
                if record["type"] == "probe":
                    key = record["memory"]
                    context[key] = max(context[key], record.get("context_tokens") or 0)
    for memory in args.memory:
        probes, turns = seconds.get((memory, "probe"), []), seconds.get((memory, "turn"), [])
        if probes:
            figures[f"{memory}: ms per probe"] = 1000 * statistics.mean(probes)
            figures[f"{memory}: ms per probe, median"] = 1000 * statistics.median(probes)
        if turns:
            figures[f"{memory}: ms per exchange"] = 1000 * statistics.mean(turns)
        if memory == "buffer" and context.get(memory):
            figures["buffer: largest context (tokens)"] = context[memory]
    figures["load average (1 min), before"] = load_before
    figures["load average (1 min), after"] = os.getloadavg()[0]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a real LoCoMo file (locomo10.json or its zip) to compare")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--memory", nargs="+", default=CLASSIC_FIVE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-synthetic", action="store_true", help="measure --data only")
    parser.add_argument(
        "--no-cache", action="store_true", help="no on-disk cache (workers share no e5 vectors)"
    )
    parser.add_argument(
        "--speedup",
        type=int,
        default=0,
        metavar="N",
        help="also time --jobs 1 against --jobs 2 on N synthetic conversations",
    )
    args = parser.parse_args()
    columns: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        sources = []
        if not args.skip_synthetic:
            path = write_dataset(tmpdir, args.conversations, args.seed)
            sources.append(("synthetic", f"locomo:{path}"))
        if args.data:
            sources.append(("real", f"locomo:{real_subset(Path(args.data), tmpdir, args)}"))
        for name, source in sources:
            figures = dataset_figures(source, args.conversations)
            print(f"{name}: measuring {source} ...", file=sys.stderr, flush=True)
            figures.update(measure(source, args, tmpdir / f"run-{name}"))
            columns[name] = figures
        if args.speedup:
            (tmpdir / "small").mkdir()
            small = f"locomo:{write_dataset(tmpdir / 'small', args.speedup, args.seed)}"
            walls = {}
            for jobs in (1, 2):
                once = argparse.Namespace(**{**vars(args), "jobs": jobs})
                walls[jobs] = measure(small, once, tmpdir / f"speedup-{jobs}")["wall time (s)"]
    rows = list(dict.fromkeys(k for figures in columns.values() for k in figures))
    print(f"\n{'':38}" + "".join(f"{name:>14}" for name in columns))
    for row in rows:
        cells = "".join(
            f"{columns[name][row]:>14,.1f}" if row in columns[name] else f"{'-':>14}"
            for name in columns
        )
        print(f"{row:38}{cells}")
    print(
        f"\n--jobs {args.jobs}, memories: {' '.join(args.memory)}; targets: wall under 300 s, "
        "peak under 3 GiB, buffer under 50 ms per probe, vector under 10 ms per exchange"
    )
    if args.speedup:
        print(
            f"speed-up of --jobs 2 over --jobs 1 on {args.speedup} synthetic conversations: "
            f"{walls[1]:.0f} s / {walls[2]:.0f} s = {walls[1] / walls[2]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
