"""--resume removes what a redone cell's interrupted execution left in the run's cells/ folder
(a killed ``hindsight`` cell leaves its PostgreSQL there), and keeps what ended cells left."""

from __future__ import annotations

from memory_lab import load_dialogues, parse_memory_spec, resolve_memories, run_benchmark
from memory_lab.results.read import RECORDS_FILE
from memory_lab.run.benchmark import resume_benchmark
from memory_lab.run.cell import cell_id_for

from ..conftest import FIXTURES


def test_resume_removes_the_folders_a_redone_cells_killed_execution_left(tmp_path):
    sources = [str(FIXTURES / "dialogues" / "mini.yaml")]
    dialogue = load_dialogues(*sources)[0]
    memories = ["window:k=1", "buffer", "window:k=2"]
    out = tmp_path / "run"
    run_benchmark(resolve_memories(memories), [dialogue], out, sources=sources, progress=False)
    lines = (out / RECORDS_FILE).read_text().splitlines(keepends=True)
    first_cell_end = next(i for i, x in enumerate(lines) if '"type": "cell"' in x)
    # killed after the first cell (window:k=1) ended, during the second (buffer), whose
    # execution left its files, as a hindsight cell leaves its PostgreSQL
    (out / RECORDS_FILE).write_text("".join(lines[: first_cell_end + 3]))

    def left_by(spec: str) -> str:
        folder = out / "cells" / cell_id_for(parse_memory_spec(spec), dialogue)
        (folder / "hindsight" / "data").mkdir(parents=True)
        (folder / "hindsight" / "data" / "PG_VERSION").write_text("18\n")
        return folder.name

    killed = left_by("buffer")
    # a folder of window:k=1 (ended, kept) or of window:k=2 (redone): their folders are named
    # alike, so it is kept
    either = left_by("window:k=2")
    (out / "cells" / "notes").mkdir()  # no cell's: kept

    resume_benchmark(out, progress=False)

    left = sorted(p.name for p in (out / "cells").iterdir())
    assert killed not in left  # removed before the cell was redone
    assert left == sorted([either, "notes"])
