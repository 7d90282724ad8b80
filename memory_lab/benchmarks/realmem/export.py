"""Each memory's RealMem rankings in the authors' own input format, so their
``eval/compute_auto_metrics_for_realmem.py`` runs on them unchanged.

``DIR/<memory>/<persona>/example_retrieval_results.json``: an object keyed by question text (the
stripped query, as ``eval/eval_mem0.py`` keys its results and their script matches them), each
``{"id": session asked in, "question": text, "ranked_items": [...], "generated_answer": the
reply, "evidence_used": ""}`` with one ``{"res_type": "chunk", "chunk_id":
<session_identifier>, "rank": n}`` item per ranked session, best first (their script reads only
the ``chunk`` items, in list order). Their batch mode reads it as it is::

    python eval/compute_auto_metrics_for_realmem.py --process_retrieval_results \\
        --retrieval_result_dir DIR/<memory> --input_data_dir dataset

A memory's folder name is its label with every character outside ``[A-Za-z0-9._-]`` made
``_``; a memory that does not rank (or whose records carry no rankings) gets no folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_lab.benchmarks.realmem.importer import SESSION_KEY
from memory_lab.benchmarks.realmem.scores import RANKING_FIELD, PersonaScores, session_ranking

RESULTS_NAME = "example_retrieval_results.json"  # what their batch mode looks for


def folder_name(memory: str) -> str:
    """A memory label as a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", memory) or "_"


def retrieval_results(group: PersonaScores) -> dict[str, dict[str, Any]]:
    """One (memory, persona)'s results object, keyed by question text."""
    out: dict[str, dict[str, Any]] = {}
    for text, record in group.questions.items():
        sessions = session_ranking(record.get(RANKING_FIELD) or ())
        out[text] = {
            "id": record["probe_metadata"].get(SESSION_KEY, ""),
            "question": text,
            "ranked_items": [
                {"res_type": "chunk", "chunk_id": sid, "rank": n}
                for n, sid in enumerate(sessions, start=1)
            ],
            "generated_answer": record.get("reply") or "",
            "evidence_used": "",
        }
    return out


def export_retrieval(scored: Sequence[PersonaScores], out: Path) -> list[Path]:
    """Write every ranking memory's results under ``out``; the files written."""
    written = []
    for group in scored:
        if not group.ranks:
            continue
        folder = Path(out) / folder_name(group.memory) / group.persona
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / RESULTS_NAME
        path.write_text(
            json.dumps(retrieval_results(group), ensure_ascii=False, indent=2), encoding="utf-8"
        )
        written.append(path)
    return written
