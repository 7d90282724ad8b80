"""Vector-memory retrieval per language with each bundled offline embedding model.

Replays every dialogue of the suite through the ``vector`` memory (VectorStoreRetrieverMemory over
Chroma) once per embedding backend, exactly as a benchmark run does (``replay_dialogue`` with the
offline reader), and reports per language:

- ctx-hit: share of non-abstention probes whose accepted answer is in the retrieved context
  (independent of the answering model), with a 95% Wilson interval;
- the probes that flip between backends (hit -> miss and miss -> hit);
- recall of the offline reader (which uses the same backend for its sentence scoring);
- embedding time: seconds spent in the encoder for the whole suite (memory and reader, cache
  misses only), texts encoded, and a cold batch encode of every turn text of the suite.

    HF_HUB_OFFLINE=1 python benchmarks/embeddings_retrieval.py [--k 4] [--models minilm e5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

# Measure this checkout's memory_lab, not whatever the environment has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab import RunModels, load_dialogues, replay_dialogue  # noqa: E402
from memory_lab.models import embeddings as emb_module  # noqa: E402
from memory_lab.models.embeddings import OfflineEmbeddings, resolve_embedding_model  # noqa: E402
from memory_lab.run.prepare import resolve_memories  # noqa: E402


class EncoderClock:
    """Wraps the encoder to count texts and seconds (cache misses reach the encoder)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.texts = 0
        self._inner = emb_module._encode
        emb_module._encode = self

    def __call__(self, model, texts, kind, batch_size):
        started = time.perf_counter()
        try:
            return self._inner(model, texts, kind, batch_size)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)

    def take(self) -> tuple[float, int]:
        out = (self.seconds, self.texts)
        self.seconds, self.texts = 0.0, 0
        return out


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def replay(model: str, dialogues, spec, clock: EncoderClock) -> dict:
    embeddings = OfflineEmbeddings(model=model)
    started = time.perf_counter()
    embeddings.embed_query("warm-up")  # load the model outside the timed part
    load_seconds = time.perf_counter() - started
    clock.take()
    models = RunModels(embeddings=embeddings, record_prompts=False)
    probes: list[dict] = []
    started = time.perf_counter()
    for dialogue in dialogues:
        replay_dialogue(
            spec, dialogue, models, lambda r: probes.append(r) if r["type"] == "probe" else None
        )
    wall = time.perf_counter() - started
    encode_seconds, encoded = clock.take()
    return {
        "model": model,
        "name": embeddings.model_name,
        "probes": probes,
        "load_seconds": load_seconds,
        "wall": wall,
        "encode_seconds": encode_seconds,
        "encoded": encoded,
    }


def cold_batch(model: str, texts: list[str]) -> float:
    """Seconds to encode ``texts`` as stored documents with an empty cache."""
    started = time.perf_counter()
    OfflineEmbeddings(model=model).embed_documents(texts)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", nargs="+", default=["builtin:classic"])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--models", nargs="+", default=["minilm", "multilingual-e5-small"])
    args = parser.parse_args()
    models = [resolve_embedding_model(m) for m in args.models]
    dialogues = load_dialogues(*args.dialogues)
    spec = resolve_memories([f"vector:k={args.k}"])[0]
    turn_texts = list(dict.fromkeys(t.text for d in dialogues for t in d.turns))
    clock = EncoderClock()

    runs = [replay(m, dialogues, spec, clock) for m in models]
    print(f"vector:k={args.k} on {', '.join(args.dialogues)}: {len(dialogues)} dialogues\n")
    print("ctx-hit: accepted answer in the retrieved context (non-abstention probes)")
    header = f"{'language':<9}" + "".join(f"{r['name']:>36}" for r in runs)
    print(header)
    languages = sorted({p["language"] for p in runs[0]["probes"]})
    hits: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    for r in runs:
        for p in r["probes"]:
            if p["context_hit"] is not None:
                hits[(r["model"], p["language"])][f"{p['dialogue']}/{p['probe_id']}"] = bool(
                    p["context_hit"]
                )
    for lang in [*languages, "all"]:
        cells = []
        for r in runs:
            got = [
                v
                for (m, lg), d in hits.items()
                if m == r["model"] and lang in (lg, "all")
                for v in d.values()
            ]
            n, h = len(got), sum(got)
            lo, hi = wilson(h, n)
            cells.append(f"{h:>3}/{n:<3} {100 * h / n:5.1f}% [{100 * lo:4.1f}-{100 * hi:4.1f}]")
        print(f"{lang:<9}" + "".join(f"{c:>36}" for c in cells))

    if len(runs) >= 2:
        a, b = runs[0], runs[1]
        print(f"\nflips {a['name']} -> {b['name']} (probe ids)")
        for lang in languages:
            da, db = hits[(a["model"], lang)], hits[(b["model"], lang)]
            gained = sorted(k for k in da if db.get(k) and not da[k])
            lost = sorted(k for k in da if da[k] and not db.get(k))
            print(f"  {lang}: +{len(gained)} {gained}")
            print(f"  {lang}: -{len(lost)} {lost}")

    print("\nreader recall (the offline reader scores sentences with the same backend)")
    for lang in [*languages, "all"]:
        cells = []
        for r in runs:
            got = [bool(p["correct"]) for p in r["probes"] if lang in (p["language"], "all")]
            cells.append(f"{sum(got):>3}/{len(got):<3} {100 * sum(got) / len(got):5.1f}%")
        print(f"{lang:<9}" + "".join(f"{c:>36}" for c in cells))

    print(f"\nembedding time (cold batch: {len(turn_texts)} unique turn texts as documents)")
    for r in runs:
        cold = cold_batch(r["model"], turn_texts)
        print(
            f"  {r['name']:<26} load {r['load_seconds']:5.1f} s | suite replay: encoder "
            f"{r['encode_seconds']:5.1f} s for {r['encoded']} texts "
            f"({r['encoded'] / max(r['encode_seconds'], 1e-9):.0f} texts/s), "
            f"wall {r['wall']:5.1f} s"
            f" | cold batch {cold:5.1f} s ({len(turn_texts) / cold:.0f} texts/s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
