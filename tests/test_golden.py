"""Golden records: builtin:classic through the five classic memories, fixed apart from timings.

``tests/fixtures/golden/classic_records.jsonl.gz`` holds every record of that run (prompts as
sha256, timings dropped). A refactor must reproduce it exactly; a deliberate change of what is
measured regenerates it (``python -m tests.test_golden``) in the same commit, which says why.
Records may gain fields; the recorded fields must keep their values.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "classic_records.jsonl.gz"
MEMORIES = ["buffer", "window", "summary", "summary_buffer", "vector"]


def golden_rows(records: list[dict]) -> list[dict]:
    """Records of the five classic memories, comparable across runs."""
    rows = []
    for r in records:
        if r["memory"] not in MEMORIES or r["type"] not in ("turn", "probe", "cell"):
            continue
        r = {k: v for k, v in r.items() if k != "seconds"}
        if r.get("prompt") is not None:
            r["prompt_sha256"] = hashlib.sha256(r.pop("prompt").encode()).hexdigest()
        rows.append(r)
    return rows


def test_classic_records_match_the_golden_file(classic_run):
    from memory_lab.results import read_records

    with gzip.open(GOLDEN, "rt", encoding="utf-8") as fh:
        golden = [json.loads(line) for line in fh]
    rows = golden_rows(read_records(classic_run.path))
    assert len(rows) == len(golden)
    for old, new in zip(golden, rows, strict=True):
        differing = {k: (v, new.get(k)) for k, v in old.items() if new.get(k) != v}
        assert not differing, (old["type"], old["memory"], old["dialogue"], differing)


if __name__ == "__main__":  # regenerate: python -m tests.test_golden
    import tempfile

    from memory_lab import load_dialogues, resolve_memories, run_benchmark
    from memory_lab.results import read_records

    out = Path(tempfile.mkdtemp()) / "run"
    run_benchmark(
        resolve_memories(MEMORIES), load_dialogues("builtin:classic"), out, progress=False
    )
    with gzip.open(GOLDEN, "wt", encoding="utf-8") as fh:
        for row in golden_rows(read_records(out)):
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
