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
from memory_lab.models.spec import OFFLINE, ModelSpec, is_offline
from memory_lab.models.windows import MODEL_WINDOW, ContextWindow, context_window

MODES = ("replay", "live")
EXECUTORS = ("local", "ray")
ADVERSARIAL = ("apart", "include")
ANSWER_STYLES = ("conversation", "short")  # the answering prompts of memory_lab/models/prompt.py
DEVICES = ("cpu", "cuda")  # where the bundled embedding models run (models/onnx_encoder.py)
MAX_JUDGE_RUNS = 100  # --judge-runs: each is a call per probe and grading prompt
MAX_JUDGE_TEMPERATURE = 2.0  # the highest sampling temperature providers take


@dataclass(frozen=True)
class RunConfig:
    """Models by role, execution, protocol, pricing and cache settings of one run.

    Models: ``llm`` answers the conversation; ``memory_llm`` is the ``memory`` role (the LLM
    inside memories); ``roles`` names models for other roles a memory declares (each falls back
    to ``memory_llm``); ``embeddings`` serves vector memories; ``judge`` grades replies.
    ``timestamps``: text memories store each user line with its session's date (where the
    dialogue has dates). ``adversarial``: LoCoMo's adversarial questions are summarised
    ``apart`` from the headline (as the published harnesses do) or ``include``d in it.
    ``executor``: ``local`` (this machine: ``jobs`` processes or ``concurrency`` threads) or
    ``ray`` (cells as Ray tasks on the cluster at ``ray_address``, or a local one).
    ``judge_prompts``: grading prompt files (``builtin`` names ours; none: ours alone), each
    graded ``judge_runs`` times per probe by ``judge`` at ``judge_temperature``.
    ``answer_style``: the answering prompt, LangChain's ``conversation`` prompt or ``short``
    (a short-phrase answer, as LoCoMo-style F1 and BLEU scoring expects). ``context_limit``:
    tokens a prompt may hold (the oldest memory text is cut), None for no limit, or
    ``MODEL_WINDOW`` (the default) for the answering model's window (``window``); a run
    records the number it resolved to. ``device``: where the bundled embedding models run,
    ``cpu`` or ``cuda`` (onnxruntime's CUDA provider; run.json records it when not ``cpu``).
    """

    llm: str = OFFLINE
    memory_llm: str = OFFLINE
    roles: dict[str, str] = field(default_factory=dict)
    embeddings: str = OFFLINE
    judge: str | None = None
    base_url: str | None = None
    mode: str = "replay"
    record_prompts: bool = True
    context_limit: int | str | None = MODEL_WINDOW
    jobs: int = 1
    concurrency: int = 1
    price_model: str | None = None
    embedding_price_model: str | None = None
    prices_file: str | None = None
    cache: bool | str = True
    dry_run: bool = False
    timestamps: bool = True
    adversarial: str = "apart"
    request_timeout: float = 60.0
    executor: str = "local"
    ray_address: str | None = None
    judge_prompts: tuple[str, ...] = ()
    judge_runs: int = 1
    judge_temperature: float = 0.0
    answer_style: str = "conversation"
    device: str = "cpu"

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
        """The configuration a dry run executes: every model offline, nothing else changed."""
        return dataclasses.replace(
            self,
            llm=OFFLINE,
            memory_llm=OFFLINE,
            roles={k: OFFLINE for k in self.roles},
            embeddings=self.embeddings if is_offline(self.embeddings) else OFFLINE,
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

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if data["device"] == "cpu":  # as runs from before --device recorded it (their checksums)
            del data["device"]
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "run.json") -> RunConfig:
        """Rebuild from ``to_json`` output; ConfigError naming the file and field otherwise.
        A config without ``context_limit`` had no limit (not today's default)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: config must be an object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"{where}: config has unknown field(s): {', '.join(unknown)}")
        # a config from before the window default recorded its limit or ran without one
        data = {"context_limit": None, **data}
        try:
            return cls(**data)
        except TypeError as exc:
            raise ConfigError(f"{where}: config: {exc}") from None


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
