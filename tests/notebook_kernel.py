"""The Jupyter kernel the notebook checks run on: ipykernel with the offline embeddings pinned.

The notebooks' tables come from retrieval, and the bundled engines' last bits depend on the CPU
(``tests/pinned_vectors.py``): on another machine a near-tie retrieves another exchange and a
figure moves. So the committed outputs and the check both run on the vectors of
``notebooks/vectors.npz``: ``NOTEBOOK_VECTORS_MODE=record`` computes each text's vector, keeps it
and answers with its pinned (int8) form, saved by ``save()`` (the last cell ``notebook_outputs``
runs); ``pin`` answers from the file only, and a text it lacks fails the cell naming it
(``make notebooks`` records again).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODE = "NOTEBOOK_VECTORS_MODE"
FILE = "NOTEBOOK_VECTORS"
_seen: dict[str, tuple[str, str, str, np.ndarray]] = {}


def _install(mode: str, path: Path) -> None:
    import memory_lab.models.embeddings as embeddings
    from tests.pinned_vectors import (
        UnpinnedText,
        dequantise,
        load_pinned,
        quantise,
        vector_key,
    )

    if mode == "pin":
        table = load_pinned(path)

        def encode(model, texts, kind, batch_size, device="cpu"):
            missing = [t for t in texts if vector_key(model, kind, t) not in table]
            if missing:
                raise UnpinnedText(
                    f"{path.name} has no {model} {kind} vector for {missing[0][:60]!r}: "
                    "run make notebooks"
                )
            rows = [table[vector_key(model, kind, t)] for t in texts]
            return np.stack(rows) if rows else np.zeros((0, 384), dtype=np.float32)

    else:
        real = embeddings._encode

        def encode(model, texts, kind, batch_size, device="cpu"):
            if not texts:
                return real(model, texts, kind, batch_size)
            rows = []
            for text in texts:  # one at a time: MiniLM's last bits depend on the batch
                key = vector_key(model, kind, text)
                if key not in _seen:
                    _seen[key] = (model, kind, text, real(model, [text], kind, 1)[0])
                rows.append(_seen[key][3])
            return dequantise(*quantise(np.stack(rows)))

    embeddings._encode = encode


def save() -> None:
    """Write the vectors recorded so far (record mode) to the file, merged with what it holds."""
    from tests.pinned_vectors import pinned_texts, save_pinned, vector_key

    path = Path(os.environ[FILE])
    rows = {}
    if path.is_file():
        rows = {vector_key(m, k, t): (m, k, t, v) for m, k, t, v in pinned_texts(path)}
    rows.update(_seen)
    save_pinned(path, rows)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    mode = os.environ.get(MODE)
    if mode in ("pin", "record"):
        # installed from the importable module (this one runs as __main__), whose save() the
        # last cell calls
        from tests import notebook_kernel

        notebook_kernel._install(mode, Path(os.environ[FILE]))
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance()


if __name__ == "__main__":
    main()
