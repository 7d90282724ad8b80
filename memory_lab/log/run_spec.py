"""``RunSpec``: a run's whole description, typed and frozen, as ``run.json`` holds it.

``prepare_run`` (``run/prepare.py``) builds one; ``save`` writes it as ``run.json`` and ``load``
reads it back (a clear error naming the file and the field on bad input) in this version's
layout: an older run.json is migrated as it is read (``log/formats.py``, the one place that
knows older formats), a key a run did not write stays unwritten, and keys this version does
not know are kept. No field is written twice: the configuration is ``config``'s alone (its
figures are properties here: ``mode``, ``jobs``, ``context_limit``...). ``resumed`` gives the spec a
``--resume`` executes (what a resume may change and what it checks: ``log/resume_policy.py``).
The executors receive the spec itself (it pickles), so worker processes and Ray tasks rebuild
the run's models from it.

Some of a spec is never written: the resources' values (``resource_values``), the retries
(``max_retries``, from ``MEMORY_LAB_MAX_RETRIES`` where the spec is built), the changes a resume
makes (``overrides``: jobs, concurrency, executor, rate limits, a base URL with credentials),
the results folder and the dialogues themselves.

Each section is a typed-JSON record (``log/typed_json.py``: read, checked and written back).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Unpack

from memory_lab.dialogue.model import Dialogue
from memory_lab.dialogue.sources import load_dialogues
from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.formats import RUN_FORMAT, FormatError, migrate_run
from memory_lab.log.record_log import naming_file
from memory_lab.log.resume_policy import (
    ResumeOptions,
    check_dialogues,
    check_embedding_engines,
    check_judge_prompts,
    resume_base_url,
    resume_options,
)
from memory_lab.log.run_guard import check_config
from memory_lab.log.typed_json import (
    UNWRITTEN,
    JsonRecord,
    RunSpecError,
    as_list,
    as_model,
    as_price,
    as_records,
    as_section,
    as_strings,
)
from memory_lab.memories.specs import MemorySpec, spec_from_json
from memory_lab.models.accounting import Price
from memory_lab.models.rate_limit import RATE_FILE, RateLimits, actor_name
from memory_lab.models.spec import OFFLINE, ClientSettings, ModelSpec, is_offline
from memory_lab.models.windows import MODEL_WINDOW, describe
from memory_lab.text.limits import bounds_problem
from memory_lab.text.redact import redact_value

__all__ = [
    "DialogueEntry",
    "ModelRecord",
    "ModelSpec",
    "Pricing",
    "RoleModel",
    "RunSpec",
    "RunSpecError",
    "is_offline",
]

RUN_FILE = "run.json"


def run_info_text(info: dict[str, Any], where: str = RUN_FILE) -> str:
    """``run.json``'s text for ``info``, redacted: no password, key or token of the run is
    written (``text/redact.py``). Strict JSON: a NaN or infinite number (which JSON has not) is a
    RunSpecError naming ``where`` and the field."""
    value = redact_value(info)
    try:
        return json.dumps(
            value, indent=2, ensure_ascii=False, sort_keys=True, default=str, allow_nan=False
        )
    except ValueError as exc:
        raise RunSpecError(f"{where}: {bounds_problem(value) or exc}") from None


def write_run_info(folder: Path, info: dict[str, Any]) -> None:
    """Write ``run.json`` atomically (a reader never sees half a file) as ``run_info_text``.
    An OSError names run.json (a full disk too), and a half-written copy is removed."""
    run_file = Path(folder) / RUN_FILE
    text = run_info_text(info, str(run_file))
    tmp = run_file.with_name(RUN_FILE + ".tmp")
    with naming_file(run_file):
        try:
            if tmp.is_symlink():  # planted: never written through
                tmp.unlink()
            tmp.write_text(text, "utf-8")
            tmp.replace(run_file)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise


def read_run_file(run_file: Path) -> dict[str, Any]:
    """``run.json``'s content; RunSpecError naming the file when it is not JSON (cut short,
    not UTF-8) or not an object."""
    try:
        data = json.loads(run_file.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: JSON, long ints
        raise RunSpecError(f"{run_file}: cannot be read as JSON ({exc})") from None
    except RecursionError:  # nested deeper than Python's parser recurses
        raise RunSpecError(f"{run_file}: cannot be read as JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise RunSpecError(f"{run_file}: must hold an object, got {type(data).__name__}")
    return data


def _memory_specs(items: Any, where: str, label: str) -> tuple[MemorySpec, ...]:
    """Memory specs as recorded (checked against their factories only on resume)."""
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise ValueError("must be a list of objects")
    return tuple(
        MemorySpec(
            d["name"],
            dict(d.get("params") or {}),
            d["label"],
            d.get("source"),
            d.get("source_file"),
            d.get("source_sha256"),
        )
        for d in items
    )


@dataclass(frozen=True)
class DialogueEntry(JsonRecord):
    """A dialogue of the run: its id, file and content hash (checked on resume)."""

    id: str
    source: str | None = None
    sha256: str | None = None
    language: str | None = None
    turns: int | None = None
    probes: int | None = None

    @classmethod
    def of(cls, dialogue: Dialogue) -> DialogueEntry:
        return cls(
            dialogue.id,
            dialogue.source,
            dialogue.content_hash,
            dialogue.language,
            len(dialogue.turns),
            len(dialogue.probes),
        )


@dataclass(frozen=True)
class RoleModel(JsonRecord):
    """The model string serving a memory model role and the name it resolved to."""

    CONVERT: ClassVar[dict[str, Any]] = {"spec": as_model}

    spec: ModelSpec
    model: str


@dataclass(frozen=True)
class ModelRecord(JsonRecord):
    """run.json's ``models``: the models the run executed (offline stand-ins in a dry run)."""

    CONVERT: ClassVar[dict[str, Any]] = {
        "llm": as_model,
        "memory_llm": as_model,
        "embeddings": as_model,
        "roles": lambda d, where, label: {
            r: RoleModel.from_json(v, where, f"{label}.{r}") for r, v in d.items()
        },
    }

    llm: ModelSpec = ModelSpec(OFFLINE)
    llm_model: str | None = None
    llm_params: dict[str, Any] = field(default_factory=dict)
    memory_llm: ModelSpec = ModelSpec(OFFLINE)
    memory_llm_model: str | None = None
    memory_llm_params: dict[str, Any] = field(default_factory=dict)
    roles: dict[str, RoleModel] = field(default_factory=dict)
    embeddings: ModelSpec = ModelSpec(OFFLINE)
    embeddings_model: str | None = None
    reader_embeddings: str | None = None
    base_url: str | None = None
    tokenizer: str | None = None


@dataclass(frozen=True)
class Pricing(JsonRecord):
    """The price table entries the estimate uses (US dollars per million tokens)."""

    CONVERT: ClassVar[dict[str, Any]] = {"llm": as_price, "embeddings": as_price}

    llm_model: str | None = None
    embeddings_model: str | None = None
    llm: Price | None = None
    embeddings: Price | None = None
    source: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class JudgePrompt(JsonRecord):
    """One grading prompt of run.json's ``judge``: by file, SHA-256, version and placeholders,
    not by its text (a resume reads the file again and refuses one whose SHA-256 changed)."""

    label: str
    file: str | None = None
    sha256: str | None = None
    version: str | None = None
    placeholders: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgeRecord(JsonRecord):
    """run.json's ``judge``: the grading model, its parameters, temperature and runs per prompt,
    and every grading prompt (``prompt_version``/``prompt_file``: the first one's, as run.json
    had before several prompts)."""

    CONVERT: ClassVar[dict[str, Any]] = {"prompts": as_records(JudgePrompt)}

    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    temperature: float = 0.0
    runs: int = 1
    prompt_version: str | None = None
    prompt_file: str | None = None
    prompts: tuple[JudgePrompt, ...] = ()
    verdict: str | None = None


@dataclass(frozen=True)
class RunSpec(JsonRecord):
    """Everything that shaped a run's numbers, and how the run stands (``status``...).

    ``config`` is the configuration as recorded (requested models, absolute grading prompts);
    ``run_config`` is the one executing (with a resume's ``overrides``), ``effective`` the one
    the models are built from (a dry run's offline stand-ins).
    """

    CONVERT: ClassVar[dict[str, Any]] = {
        "config": lambda data, where, label: RunConfig.from_json(data, where),
        "memory_specs": _memory_specs,
        "memories": as_strings,
        "dialogue_sources": as_strings,
        "dialogues": as_records(DialogueEntry),
        "resources": as_strings,
        "models": as_section(ModelRecord),
        "pricing": as_section(Pricing),
        "argv": as_list,
        "errors": as_list,
        "resume_history": as_list,
        "judge": lambda data, where, label: (
            None if data is None else JudgeRecord.from_json(data, where, label)
        ),
    }
    KEYS: ClassVar[dict[str, str]] = {"resume_history": "resumed"}

    format_version: int = RUN_FORMAT  # log/formats.py: an older file is migrated when read
    run_id: str | None = None
    started: str | None = None
    status: str = "running"
    argv: tuple[str, ...] = ()
    config: RunConfig = field(default_factory=RunConfig)
    memories: tuple[str, ...] = ()
    memory_specs: tuple[MemorySpec, ...] = ()
    dialogue_sources: tuple[str, ...] = ()
    dialogues: tuple[DialogueEntry, ...] = ()
    resources: tuple[str, ...] = ()  # names only: values are never written
    models: ModelRecord = field(default_factory=ModelRecord)
    prompt_template: str | None = None
    cache_dir: str | None = None
    judge: JudgeRecord | None = None
    context_limit_source: str | None = None  # given, model, none, unknown (windows.SOURCES)
    pricing: Pricing = field(default_factory=Pricing)
    packages: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    platform: str | None = None
    config_sha256: dict[str, str] | None = None
    finished: str | None = None
    failed_cells: int | None = None
    errors: tuple[dict[str, Any], ...] = ()
    resume_history: tuple[dict[str, Any], ...] = ()  # run.json's "resumed": one entry a resume
    # what --rpm/--tpm did in the run's last execution (requests, 429s, seconds waited)
    rate_limits: dict[str, Any] | None = None  # a new run's is unwritten until it ends
    # never written
    max_retries: int = field(default=ClientSettings.max_retries, metadata=UNWRITTEN)
    resource_values: dict[str, str] = field(default_factory=dict, metadata=UNWRITTEN, repr=False)
    overrides: dict[str, Any] = field(default_factory=dict, metadata=UNWRITTEN)
    folder: str | None = field(default=None, metadata=UNWRITTEN)
    resuming: bool = field(default=False, metadata=UNWRITTEN)
    dialogue_set: tuple[Dialogue, ...] = field(
        default=(), metadata=UNWRITTEN, repr=False, compare=False
    )

    # -- what readers take of the configuration (format 1 wrote these beside it as well) -----

    @property
    def answer_style(self) -> str:
        return self.config.answer_style

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def context_limit(self) -> int | None:
        """The prompt limit in tokens the run resolved (None: no limit)."""
        limit = self.config.context_limit
        return None if limit == MODEL_WINDOW else limit

    @property
    def dry_run(self) -> dict[str, str] | None:
        """The requested models a dry run stood in for (None: not a dry run)."""
        c = self.config
        if not c.dry_run:
            return None
        wanted = {"llm": c.llm, "memory_llm": c.memory_llm, "embeddings": c.embeddings}
        if c.judge is None or is_offline(c.judge):  # the offline judge stands in for none
            return wanted
        return {**wanted, "judge": c.judge}

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def load(cls, folder: str | Path, *, max_retries: int | None = None) -> RunSpec:
        """``folder/run.json`` (FileNotFoundError without one, RunSpecError naming the file and
        the field when it is unusable); ``max_retries`` unset: ``MEMORY_LAB_MAX_RETRIES``."""
        run_file = Path(folder) / RUN_FILE
        if not run_file.exists():
            raise FileNotFoundError(errno.ENOENT, f"no {RUN_FILE}", str(folder))
        data = read_run_file(run_file)
        retries = ClientSettings.from_env().max_retries if max_retries is None else max_retries
        spec = cls.read(data, str(run_file))
        return dataclasses.replace(spec, folder=str(folder), max_retries=retries)

    @classmethod
    def read(cls, data: Any, where: str = RUN_FILE) -> RunSpec:
        """A spec from run.json's content (``where`` names it in errors)."""
        if not isinstance(data, dict):
            raise RunSpecError(f"{where}: must hold an object, got {type(data).__name__}")
        try:
            data = migrate_run(data, where)
        except FormatError as exc:
            raise RunSpecError(str(exc)) from None
        return cls.from_json(data, where, "")

    def require(self, *fields: str) -> None:
        """RunSpecError naming the first of ``fields`` the file lacks."""
        for name in fields:
            if name in self.absent:
                raise RunSpecError(f"{self.run_file}: lacks the field {name!r}")

    @property
    def run_file(self) -> str:
        return str(Path(self.folder) / RUN_FILE) if self.folder else RUN_FILE

    # -- writing ------------------------------------------------------------------------------

    def save(self, folder: str | Path | None = None) -> None:
        """Write ``run.json`` atomically, redacted (``write_run_info``)."""
        target = Path(folder if folder is not None else self.folder)
        write_run_info(target, self.to_json())

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with ``changes``; a field given is written even if the file lacked it."""
        return dataclasses.replace(self, **changes, absent=self.absent - changes.keys())

    def without(self, *names: str) -> RunSpec:
        """A copy that no longer writes ``names`` (e.g. a resumed run's old ``errors``)."""
        return dataclasses.replace(self, absent=self.absent | set(names))

    def resumed(self, **options: Unpack[ResumeOptions]) -> RunSpec:
        """The spec a ``--resume`` of this run executes: the recorded configuration, memories
        (checked against their factories: never today's defaults) and dialogues (checked against
        their content hashes), with only the options a resume may change (``ResumeOptions``).
        ValueError naming the file when the run cannot be resumed as recorded."""
        options = resume_options(options)
        where = self.run_file
        self.require("config", "memory_specs", "dialogue_sources", "dialogues")
        if not self.dialogue_sources:
            raise RunSpecError(f"{where}: records no dialogue sources; cannot resume")
        check_config(self.to_json(), Path(where))
        overrides: dict[str, Any] = {}
        url = resume_base_url(self.config.base_url, options.get("base_url"), where)
        if url != self.config.base_url:
            overrides["base_url"] = url
        check_judge_prompts(self, where)
        check_embedding_engines(self, where)
        changes = {k: options[k] for k in ("jobs", "concurrency") if options.get(k) is not None}
        if changes:
            overrides.update({"jobs": 1, "concurrency": 1, **changes})
        overrides.update({k: options[k] for k in ("rpm", "tpm") if options.get(k) is not None})
        executor, ray_address = options.get("executor"), options.get("ray_address")
        if executor is not None or ray_address is not None:
            overrides["executor"] = executor or ("ray" if ray_address else self.config.executor)
            overrides["ray_address"] = ray_address
        self.config.replace(**overrides)  # ConfigError now for a combination it refuses
        trust = bool(options.get("trust_sources"))
        memories = tuple(spec_from_json(m.to_json(), where, trust) for m in self.memory_specs)
        dialogues = load_dialogues(*self.dialogue_sources)
        check_dialogues(self, dialogues)
        resources = options.get("resources") or {}
        missing = sorted(set(self.resources) - set(resources))
        if missing:
            raise ConfigError(
                f"{self.folder}: the run used resource(s) {', '.join(missing)}; pass them again "
                "with --resource NAME=VALUE (they are never written to run.json)"
            )
        return dataclasses.replace(
            self,
            memory_specs=memories,
            overrides=overrides,
            resource_values=dict(resources),
            resuming=True,
            dialogue_set=tuple(dialogues),
        )

    # -- what runs ----------------------------------------------------------------------------

    @functools.cached_property
    def run_config(self) -> RunConfig:
        """The configuration executing: the recorded one with a resume's changes (derived once
        per spec: a change makes a new spec)."""
        return self.config.replace(**self.overrides) if self.overrides else self.config

    @functools.cached_property
    def effective(self) -> RunConfig:
        """The configuration the models are built from (every model offline in a dry run)."""
        config = self.run_config
        return config.offline_stand_ins() if config.dry_run else config

    @property
    def client(self) -> ClientSettings:
        """How this run's provider clients behave (request timeout, retries, and the rate limits
        they share: a bucket in the run folder, with Ray a named actor; none in a dry run)."""
        config = self.run_config
        return ClientSettings(config.request_timeout, self.max_retries, self.rate_limits_setting)

    @property
    def rate_limits_setting(self) -> RateLimits | None:
        """The run's ``--rpm``/``--tpm`` and where their shared bucket lives (None: none)."""
        config = self.run_config
        if config.dry_run or self.folder is None:
            return None
        file = str(Path(self.folder).resolve() / RATE_FILE)
        actor = actor_name(self.run_id) if config.executor == "ray" else None
        return RateLimits.of(config.rpm, config.tpm, file, actor)

    @property
    def reader_model(self) -> ModelSpec:
        """The answering model the run executed (``models.llm``; the config's when absent)."""
        return self.models.llm if "llm" not in self.models.absent else self.config.model("reader")

    @property
    def context_limit_text(self) -> str | None:
        """The run's context limit in words (``windows.describe``); None when run.json records
        neither the limit nor its source (a run from before either was recorded)."""
        if "context_limit_source" in self.absent:
            return None
        return describe(self.context_limit, self.context_limit_source, self.config.llm)

    @property
    def judge_model(self) -> ModelSpec | None:
        """The grading model (``judge.model``), None without a judge."""
        model = self.judge.model if self.judge is not None else None
        return None if model is None else ModelSpec.parse(model)

    def for_workers(self) -> RunSpec:
        """The spec a worker process or Ray task receives: cells carry their dialogues, and the
        folder is named absolutely (``work_dir`` of the run's models)."""
        folder = str(Path(self.folder).resolve()) if self.folder else None
        return dataclasses.replace(self, dialogue_set=(), folder=folder)
