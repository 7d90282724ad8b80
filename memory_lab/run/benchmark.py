"""A whole run in one call: ``run_benchmark`` prepares and executes a new run, and
``resume_benchmark`` executes the rest of an interrupted one (``prepare`` and ``execute`` are the
two steps)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Unpack

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.config import RunConfig
from memory_lab.log.run_guard import hold_folder
from memory_lab.log.run_spec import (
    RUN_FILE,
    ResumeOptions,
    RunSpec,
    resume_options,
)
from memory_lab.memories.registry import (
    MemorySpec,
)
from memory_lab.results.read import read_run_json
from memory_lab.run.execute import RunOutcome, execute
from memory_lab.run.prepare import preflight, prepare_run
from memory_lab.text.redact import remember_resources


def run_benchmark(
    memories: list[MemorySpec],
    dialogues: list[Dialogue],
    out: str | Path,
    config: RunConfig | None = None,
    *,
    sources: list[str] | None = None,
    resources: dict[str, str] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    **settings: Any,
) -> RunOutcome:
    """Replay every dialogue through every memory; write records, run.json and summary.csv.

    ``config`` and the same settings as keywords (e.g. ``llm="openai:gpt-4o-mini"``, ``jobs=2``;
    given both, the keywords change the config) hold everything that shapes the numbers; see
    ``RunConfig``. ``resources`` are run-wide
    named resources for memories (a database URL): used, and only their names are written;
    every password, key or token is redacted from run.json, errors and cache keys. A cell
    that raises is recorded as failed with its error and the run goes on. ``jobs`` > 1 runs
    cells in processes (memories must be built in or named ``module:factory``); records are the
    same as with one job apart from timings. ``dry_run`` replays with the offline stand-ins,
    calling no provider, and prices the tokens as the requested models. ``overwrite``: a folder
    that holds a run is emptied of that run's files first (otherwise it is refused). It is
    ``execute(prepare_run(...))``.
    """
    spec = prepare_run(
        memories,
        dialogues,
        out,
        RunConfig.given(config, settings),
        sources=sources,
        resources=resources,
    )
    return execute(spec, progress=progress, overwrite=overwrite)


def resume_benchmark(
    out: str | Path, *, progress: bool = True, **options: Unpack[ResumeOptions]
) -> RunOutcome:
    """Continue an interrupted run in ``out``: finished cells are kept, the rest are redone.

    Records of cells that did not finish (or failed) are removed first and complete parts of
    unfinished cells are adopted, so nothing is lost or duplicated (``log/record_log.py``).
    Memories are rebuilt from their recorded parameters (never today's defaults), dialogues
    from their recorded absolute sources (checked against their content hashes), and models
    from the recorded config; only ``jobs``/``concurrency``, the executor (``executor``,
    ``ray_address``) and the rate limits (``rpm``, ``tpm``) may change, and ``resources`` must
    be given again (never written), as must a base URL with credentials (``base_url``, else
    ``OPENAI_BASE_URL``; see ``run_spec.resume_base_url``): ``options`` are
    ``run_spec.ResumeOptions``. The folder is locked first (a live run's is refused:
    ``log/run_guard.py``) and a run.json whose configuration was edited since the run started
    is refused. It is ``execute(RunSpec.load(out).resumed(...))`` after the preflight.
    """
    options = resume_options(options)
    folder = Path(out)
    if not os.path.lexists(folder / RUN_FILE):  # no lock file left in a folder that is no run's
        raise FileNotFoundError(errno.ENOENT, "no run.json to resume", str(folder))
    read_run_json(folder)  # as report reads it: a regular file in the folder, size-bounded
    remember_resources(options.get("resources"), options.get("base_url"))
    with hold_folder(folder):  # before run.json is read: a live run's folder is refused
        spec = RunSpec.load(folder).resumed(**options)
        preflight(spec.effective, spec.memory_specs, spec.resource_values)
        return execute(spec, progress=progress, locked=True)
