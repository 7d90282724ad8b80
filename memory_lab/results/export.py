"""Write imported datasets back out as our YAML dialogues (a benchmark's own formats: its
declaration's ``exports``, ``memory-lab export``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from memory_lab.dialogue.importers import import_source


def write_yaml_dialogues(fmt: str, path: str | Path, out: str | Path, **options: str) -> list[Path]:
    """Import ``path`` and write one YAML file per dialogue under ``out``."""
    result = import_source(fmt, path, options)
    result.report.print()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for doc in result.documents:
        target = folder / f"{doc['id']}.yaml"
        target.write_text(
            yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=100), "utf-8"
        )
        written.append(target)
    return written
