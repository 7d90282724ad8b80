"""``RunConfig``: every setting that shapes a run's numbers, in one frozen object.

It is what the CLI builds and ``run_benchmark`` receives, part of the run's ``RunSpec`` (which
the workers receive), what ``run.json`` records (``to_json``) and ``--resume`` rebuilds
(``from_json``). Run-wide named resources such as a database URL are deliberately not part of it:
they are passed beside it and never written. ``ClientSettings`` (request timeout, retries; in
``models.spec``) is how provider clients behave: read from the environment once, where a run's
spec is built, and passed as a value from there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from memory_lab.errors import ConfigError
from memory_lab.models.rate_limit import RateSetting, check_rates, parse_rates
from memory_lab.models.spec import OFFLINE, ModelSpec, is_offline
from memory_lab.models.windows import MODEL_WINDOW, ContextWindow, context_window, parse_limit

MODES = ("replay", "live")
EXECUTORS = ("local", "ray")
ADVERSARIAL = ("apart", "include")
ANSWER_STYLES = ("conversation", "short")  # the answering prompts of memory_lab/models/prompt.py
DEVICES = ("cpu", "cuda")  # where the bundled embedding models run (models/onnx_encoder.py)
MAX_JUDGE_RUNS = 100  # --judge-runs: each is a call per probe and grading prompt
MAX_JUDGE_TEMPERATURE = 2.0  # the highest sampling temperature providers take
# run.json's sections of a config, in order: each field belongs to one (``_in``)
GROUPS = ("models", "protocol", "run", "judge", "limits", "pricing")
# fields written only when set: a run without them writes what runs wrote before they were
# (its config_sha256 and a resume of an older run unchanged)
WRITTEN_WHEN_SET = ("rpm", "tpm")


def _in(group: str, default: Any = None, *, key: str | None = None, factory: Any = None) -> Any:
    """A RunConfig field of ``group``, written there as ``key`` (its own name unless given)."""
    assert group in GROUPS
    meta = {"group": group, "key": key}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunConfig:
    """Models by role, execution, protocol, pricing and cache settings of one run.

    Its fields fall in run.json's sections (``GROUPS``): ``models`` (llm, memory_llm, roles,
    embeddings, base_url), ``protocol`` (mode, answer_style, timestamps, adversarial), ``run``
    (jobs, concurrency, executor, ray_address, device, cache, dry_run, record_prompts),
    ``judge`` (judge as ``model``, judge_prompts as ``prompts``, judge_runs as ``runs``,
    judge_temperature as ``temperature``), ``limits`` (context_limit, request_timeout, rpm,
    tpm) and ``pricing`` (price_model, embedding_price_model, prices_file); in Python they are
    read and given by name (``RunConfig(llm=..., jobs=2)``, ``config.llm``). The command line
    builds one in one place, ``from_options``.

    Models: ``llm`` answers the conversation; ``memory_llm`` is the ``memory`` role (the LLM
    inside memories); ``roles`` names models for other roles a memory declares (each falls back
    to ``memory_llm``); ``embeddings`` serves vector memories; ``judge`` grades replies.
    ``timestamps``: text memories store each user line with its session's date (where the
    dialogue has dates). ``adversarial``: a benchmark's adversarial questions are summarised
    ``apart`` from the headline (as the published harnesses do) or ``include``d in it.
    ``executor``: ``local`` (this machine: ``jobs`` processes or ``concurrency`` threads) or
    ``ray`` (cells as Ray tasks on the cluster at ``ray_address``, or a local one).
    ``judge_prompts``: grading prompt files (``builtin`` names ours; none: ours alone), each
    graded ``judge_runs`` times per probe by ``judge`` at ``judge_temperature``.
    ``answer_style``: the answering prompt, LangChain's ``conversation`` prompt or ``short``
    (a short-phrase answer, as the field's F1 and BLEU scoring expects). ``context_limit``:
    tokens a prompt may hold (the oldest memory text is cut), None for no limit, or
    ``MODEL_WINDOW`` (the default) for the answering model's window (``window``); a run
    records the number it resolved to. ``device``: where the bundled embedding models run,
    ``cpu`` or ``cuda`` (onnxruntime's CUDA provider). ``rpm``/``tpm``: requests and tokens a
    minute each provider is kept under (a number, or provider -> number; None: no limit), by one
    bucket every thread, process and Ray task of the run shares (``models/rate_limit.py``).
    """

    llm: str = _in("models", OFFLINE)
    memory_llm: str = _in("models", OFFLINE)
    roles: dict[str, str] = _in("models", factory=dict)
    embeddings: str = _in("models", OFFLINE)
    judge: str | None = _in("judge", None, key="model")
    base_url: str | None = _in("models", None)
    mode: str = _in("protocol", "replay")
    record_prompts: bool = _in("run", True)
    context_limit: int | str | None = _in("limits", MODEL_WINDOW)
    jobs: int = _in("run", 1)
    concurrency: int = _in("run", 1)
    price_model: str | None = _in("pricing", None)
    embedding_price_model: str | None = _in("pricing", None)
    prices_file: str | None = _in("pricing", None)
    cache: bool | str = _in("run", True)
    dry_run: bool = _in("run", False)
    timestamps: bool = _in("protocol", True)
    adversarial: str = _in("protocol", "apart")
    request_timeout: float = _in("limits", 60.0)
    executor: str = _in("run", "local")
    ray_address: str | None = _in("run", None)
    judge_prompts: tuple[str, ...] = _in("judge", (), key="prompts")
    judge_runs: int = _in("judge", 1, key="runs")
    judge_temperature: float = _in("judge", 0.0, key="temperature")
    answer_style: str = _in("protocol", "conversation")
    device: str = _in("run", "cpu")
    rpm: RateSetting = _in("limits", None)
    tpm: RateSetting = _in("limits", None)

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.concurrency < 1:
            raise ConfigError("--jobs and --concurrency must be at least 1")
        if self.jobs > 1 and self.concurrency > 1:
            raise ConfigError(
                "use --jobs (CPU-bound, processes) or --concurrency (API-bound), not both"
            )
        if self.executor not in EXECUTORS:
            raise ConfigError(
                f"--executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}"
            )
        if self.ray_address is not None and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")
        if self.device not in DEVICES:
            raise ConfigError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.mode not in MODES:
            raise ConfigError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not (_is_number(self.request_timeout) and 0 < self.request_timeout < math.inf):
            raise ConfigError(
                "--request-timeout must be a positive number of seconds (finite), "
                f"got {self.request_timeout!r}"
            )
        if self.adversarial not in ADVERSARIAL:
            raise ConfigError(
                f"--adversarial must be one of {', '.join(ADVERSARIAL)}, got {self.adversarial!r}"
            )
        limit = self.context_limit
        if limit is not None and limit != MODEL_WINDOW and not (_is_whole(limit) and limit >= 1):
            raise ConfigError(
                "--context-limit must be a positive whole number of tokens, 'none' or "
                f"'{MODEL_WINDOW}', got {limit!r}"
            )
        object.__setattr__(self, "judge_prompts", tuple(self.judge_prompts))
        if not (_is_whole(self.judge_runs) and 1 <= self.judge_runs <= MAX_JUDGE_RUNS):
            raise ConfigError(
                f"--judge-runs must be a whole number from 1 to {MAX_JUDGE_RUNS}, "
                f"got {self.judge_runs!r}"
            )
        temperature = self.judge_temperature
        if not (_is_number(temperature) and 0 <= temperature <= MAX_JUDGE_TEMPERATURE):
            raise ConfigError(
                f"--judge-temperature must be a number from 0 to {MAX_JUDGE_TEMPERATURE:g}, "
                f"got {temperature!r}"
            )
        if self.judge is None:
            for option, given in (
                ("--judge-prompt", bool(self.judge_prompts)),
                ("--judge-runs", self.judge_runs != 1),
                ("--judge-temperature", self.judge_temperature != 0.0),
            ):
                if given:
                    raise ConfigError(f"{option} needs --judge MODEL")
        if self.answer_style not in ANSWER_STYLES:
            raise ConfigError(
                f"--answer-style must be one of {', '.join(ANSWER_STYLES)}, "
                f"got {self.answer_style!r}"
            )
        for role in self.roles:
            if role in ("reader", "judge") or not role.isidentifier():
                raise ConfigError(f"--model: {role!r} is not a memory model role name")
        for name in WRITTEN_WHEN_SET:
            value = getattr(self, name)
            known = _providers() if isinstance(value, dict) else ()
            object.__setattr__(self, name, check_rates(value, f"--{name}", known))

    def role_spec(self, role: str) -> str:
        """The model string serving a memory role (``memory`` or one a memory declared)."""
        if role == "memory":
            return self.memory_llm
        return self.roles.get(role, self.memory_llm)

    def model_specs(self) -> list[str]:
        """Every model string this run may call (for provider checks before the run)."""
        specs = [self.llm, self.memory_llm, *self.roles.values(), self.embeddings]
        specs += [self.judge or OFFLINE]
        return [s for s in dict.fromkeys(specs) if not is_offline(s)]

    def uses_provider(self) -> bool:
        return bool(self.model_specs())

    def offline_stand_ins(self) -> RunConfig:
        """The configuration a dry run executes: every model offline, the judge's too (its
        verdicts are the offline judge's, its tokens those of the requested prompts), nothing
        else changed."""
        return dataclasses.replace(
            self,
            llm=OFFLINE,
            memory_llm=OFFLINE,
            roles={k: OFFLINE for k in self.roles},
            embeddings=self.embeddings if is_offline(self.embeddings) else OFFLINE,
            judge=None if self.judge is None else OFFLINE,
        )

    def window(self) -> ContextWindow:
        """The prompt limit this configuration gives and where it came from
        (``windows.context_window``)."""
        return context_window(self.context_limit, self.llm)

    def model(self, role: str) -> ModelSpec:
        """The parsed model of a role: ``reader``, ``embeddings``, ``judge`` or a memory role
        (each string parsed once per configuration; ValueError for one that does not parse)."""
        if role == "reader":
            text = self.llm
        elif role in ("embeddings", "judge"):
            text = getattr(self, role) or OFFLINE
        else:
            text = self.role_spec(role)
        parsed = self.__dict__.setdefault("_parsed_models", {})  # not a field: never written
        if text not in parsed:
            parsed[text] = ModelSpec.parse(text)
        return parsed[text]

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def given(cls, config: RunConfig | None, settings: dict[str, Any]) -> RunConfig:
        """``config`` with ``settings`` (field names) changed, or a RunConfig of ``settings``:
        what an API taking both a config and keyword settings runs (none is dropped)."""
        return config.replace(**settings) if config is not None else cls(**settings)

    def to_json(self) -> dict[str, Any]:
        """The configuration as run.json holds it: one object per section of ``GROUPS``."""
        flat = dataclasses.asdict(self)
        for name in WRITTEN_WHEN_SET:
            if flat[name] is None:
                del flat[name]
        return group_config(flat)

    @classmethod
    def from_json(cls, data: Any, where: str = "run.json") -> RunConfig:
        """Rebuild from ``to_json`` output (run.json's current format: ``log/formats.py``
        migrates older ones); ConfigError naming the file and the field otherwise."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: config must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(GROUPS))
        if unknown:
            raise ConfigError(f"{where}: config has unknown field(s): {', '.join(unknown)}")
        flat: dict[str, Any] = {}
        for group, members in _members().items():
            section = data.get(group, {})
            if not isinstance(section, dict):
                raise ConfigError(
                    f"{where}: config.{group} must be an object, got {type(section).__name__}"
                )
            unknown = sorted(set(section) - set(members))
            if unknown:
                raise ConfigError(
                    f"{where}: config.{group} has unknown field(s): {', '.join(unknown)}"
                )
            flat.update({members[key]: value for key, value in section.items()})
        try:
            return cls(**flat)
        except TypeError as exc:
            raise ConfigError(f"{where}: config: {exc}") from None

    @classmethod
    def from_options(cls, options: Any, **fixed: Any) -> RunConfig:
        """The configuration command-line options describe (an ``argparse.Namespace``), the
        one place options become a RunConfig: each field from its option (``OPTIONS``) where
        the command has that option, ``fixed`` fields as given, the rest their defaults."""
        values = {
            name: read(options)
            for name, (dests, read) in OPTIONS.items()
            if name not in fixed and all(hasattr(options, d) for d in dests)
        }
        return cls(**values, **fixed)


def _members() -> dict[str, dict[str, str]]:
    """section -> {its key in run.json -> field name}."""
    out: dict[str, dict[str, str]] = {group: {} for group in GROUPS}
    for f in dataclasses.fields(RunConfig):
        out[f.metadata["group"]][f.metadata["key"] or f.name] = f.name
    return out


def group_config(flat: dict[str, Any]) -> dict[str, Any]:
    """A configuration's fields by name (``dataclasses.asdict``, or version 1's run.json) as
    run.json's sections; a name that is no field stays where it was (``from_json`` refuses it)."""
    out: dict[str, Any] = {group: {} for group in GROUPS}
    places = {name: (group, key) for group, m in _members().items() for key, name in m.items()}
    for name, value in flat.items():
        if name in places:
            group, key = places[name]
            out[group][key] = list(value) if isinstance(value, tuple) else value
        else:
            out[name] = value
    return out


def _providers() -> tuple[str, ...]:
    """The providers a ``--rpm PROVIDER=N`` may name."""
    from memory_lab.models.providers import PROVIDERS

    return tuple(PROVIDERS)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """An int or float (NaN and infinities included: the caller's range refuses them)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def named_values(items: list[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` items of a repeatable option as a dict (ValueError naming the option)."""
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"{option} expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value
    return out


def _cache(options: Any) -> bool | str:
    if options.no_cache:
        return False
    return str(options.cache_dir) if options.cache_dir else True


# field -> (the option dests it reads, how): what ``RunConfig.from_options`` builds each from
OPTIONS: dict[str, tuple[tuple[str, ...], Any]] = {
    "llm": (("llm",), lambda o: o.llm),
    "memory_llm": (("memory_llm",), lambda o: o.memory_llm),
    "roles": (("model",), lambda o: named_values(o.model, "--model")),
    "embeddings": (("embeddings",), lambda o: o.embeddings),
    "base_url": (("base_url",), lambda o: o.base_url),
    "judge": (("judge",), lambda o: o.judge),
    "judge_prompts": (("judge_prompt",), lambda o: tuple(o.judge_prompt)),
    "judge_runs": (("judge_runs",), lambda o: o.judge_runs),
    "judge_temperature": (("judge_temperature",), lambda o: o.judge_temperature),
    "answer_style": (("answer_style",), lambda o: o.answer_style),
    "device": (("device",), lambda o: o.device),
    "mode": (("mode",), lambda o: o.mode),
    "record_prompts": (("no_prompts",), lambda o: not o.no_prompts),
    "context_limit": (("context_limit",), lambda o: parse_limit(o.context_limit)),
    "jobs": (("jobs",), lambda o: o.jobs),
    "concurrency": (("concurrency",), lambda o: o.concurrency),
    "executor": (("executor",), lambda o: o.executor or EXECUTORS[0]),
    "ray_address": (("ray_address",), lambda o: o.ray_address),
    "price_model": (("price_model",), lambda o: o.price_model),
    "prices_file": (("prices",), lambda o: str(o.prices) if o.prices else None),
    "cache": (("no_cache", "cache_dir"), _cache),
    "dry_run": (("dry_run",), lambda o: o.dry_run),
    "timestamps": (("timestamps",), lambda o: o.timestamps == "on"),
    "request_timeout": (("request_timeout",), lambda o: o.request_timeout),
    "rpm": (("rpm",), lambda o: parse_rates(o.rpm, "--rpm")),
    "tpm": (("tpm",), lambda o: parse_rates(o.tpm, "--tpm")),
    "adversarial": (("adversarial",), lambda o: o.adversarial),
}
