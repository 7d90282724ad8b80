"""A sweep spec: a YAML file naming memories × sources × run options, read and checked.

.. code-block:: yaml

    name: classic
    title: The built-in suite through the five classic memories
    out: results/sweeps/classic          # relative to the working directory; --out overrides
    memories: [buffer, window, summary, summary_buffer, vector]
    sources:
      - key: builtin
        title: Built-in dialogues
        dialogues: builtin:classic
      - key: beam-{scale}                 # one run per entry of vary, its fields filled in
        dialogues: "beam:${BEAM}#scale={scale},conversations={conversations}"
        memories: [vector, hybrid]        # this source's memories instead of the sweep's
        vary:
          - {scale: 100K, conversations: 1-20}
          - {scale: 1M, conversations: 10}
    options: {jobs: 2, no_prompts: true}  # memory-lab run's options, for every run
    grid: {jobs: [1, 2]}                  # every combination, for every source: one run each
    measure: {floor: true}                # the embedding floor of the same texts
    report: {growth: true, answer: true, page: docs/which-memory.md, about: "Markdown ..."}

``${NAME}`` is a variable: ``--set NAME=VALUE`` on the command line, else the environment
(``${OUT}``: the sweep's results folder, e.g. for ``cache_dir: ${OUT}/cache``); a run
whose fields name one that neither gives is left out (``memory-lab sweep`` says which and why),
and running it by name (``--only``) is an error naming the file, the field and the variable.
Every run of the expanded sweep is one results folder, ``OUT/<key>``: a folder that holds a run
is resumed.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_lab.errors import BadInput

# memory-lab run's options a spec may set (the run's own checks apply to their values), and
# the type each takes; a flag (bool) is given only when true
RUN_OPTIONS: dict[str, type] = {
    "jobs": int,
    "concurrency": int,
    "llm": str,
    "memory_llm": str,
    "embeddings": str,
    "judge": str,
    "base_url": str,
    "executor": str,
    "ray_address": str,
    "context_limit": str,
    "timestamps": str,
    "answer_style": str,
    "adversarial": str,
    "request_timeout": float,
    "rpm": str,  # N, or PROVIDER=N
    "tpm": str,
    "price_model": str,
    "no_prompts": bool,
    "no_cache": bool,
    "device": str,
    "cache_dir": str,
}
TOP_FIELDS = {"name", "title", "out", "memories", "sources", "options", "grid", "measure", "report"}
SOURCE_FIELDS = {"key", "title", "dialogues", "memories", "vary", "options"}
MEASURE_FIELDS = {"floor", "sample", "interval"}
REPORT_FIELDS = {"growth", "answer", "page", "by_conversation", "about"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its folder's key, what it replays, through what, with what options."""

    key: str
    title: str
    dialogues: str
    memories: tuple[str, ...]
    options: Mapping[str, Any]
    unset: str = ""  # why it cannot run here: a variable its fields name and nothing set

    def command(self, folder: Path) -> list[str]:
        """``memory-lab run``'s arguments for this run into ``folder`` (a fresh run)."""
        args = ["--dialogues", self.dialogues, "--memory", *self.memories, "--out", str(folder)]
        return args + option_args(self.options)


@dataclass(frozen=True)
class Measure:
    floor: bool = False  # the embedding floor of the run's texts, measured after it
    sample: int = 120  # texts timed per kind for the floor
    interval: float = 1.0  # seconds between the sampler's looks at the process tree


@dataclass(frozen=True)
class Report:
    growth: bool = False  # seconds and maintenance tokens per exchange by history, per doubling
    answer: bool = False  # the "which memory?" rule over each run's memories
    page: str | None = None  # a Markdown page the report is also written to
    about: str | None = None  # Markdown the report opens with: what the sweep measures
    by_conversation: bool = False  # each memory's lowest and highest conversation


@dataclass(frozen=True)
class Sweep:
    path: Path
    name: str
    title: str
    out: Path
    runs: tuple[Run, ...]
    measure: Measure = field(default_factory=Measure)
    report: Report = field(default_factory=Report)

    def run(self, key: str) -> Run:
        for r in self.runs:
            if r.key == key:
                return r
        raise BadInput(f"{self.path}: no run {key!r} (runs: {', '.join(self.keys())})")

    def keys(self) -> list[str]:
        return [r.key for r in self.runs]


def option_args(options: Mapping[str, Any]) -> list[str]:
    """``memory-lab run``'s command-line arguments for a spec's options."""
    args: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            args += [flag] if value else []
        else:
            args += [flag, str(value)]
    return args


def load(
    path: str | Path, variables: Mapping[str, str] | None = None, out: str | Path | None = None
) -> Sweep:
    """Read and check the spec at ``path``; ``variables`` fill its ``${NAME}`` (then the
    environment; ``${OUT}`` is the sweep's results folder: ``out``, else the spec's). Every
    problem is a ``BadInput`` naming the file and the field."""
    import os

    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BadInput(f"{path}: cannot read the sweep spec ({e.strerror or e})") from e
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not YAML: {e}") from e
    found = {**os.environ, **(variables or {})}
    if isinstance(data, dict):
        found["OUT"] = str(out or data.get("out") or f"results/sweeps/{data.get('name')}")
    sweep = _sweep(path, data, found)
    return replace(sweep, out=Path(out)) if out else sweep


def _sweep(path: Path, data: Any, variables: Mapping[str, str]) -> Sweep:
    where = _Where(path)
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a sweep spec is a mapping (name, memories, sources, ...)")
    where.unknown(data, TOP_FIELDS, "")
    name = where.text(data, "name", "name", required=True)
    memories = where.names(data.get("memories"), "memories")
    options = where.options(data.get("options") or {}, "options")
    grid = where.grid(data.get("grid") or {}, "grid")
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        raise BadInput(f"{path}: sources: give a list of sources (key, dialogues)")
    runs: list[Run] = []
    for i, source in enumerate(sources):
        runs += where.source(source, f"sources[{i}]", memories, options, grid, variables)
    keys = [r.key for r in runs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise BadInput(f"{path}: sources: two runs would share the folder {twice[0]!r}")
    return Sweep(
        path=path,
        name=name,
        title=where.text(data, "title", "title") or name,
        out=Path(where.text(data, "out", "out") or f"results/sweeps/{name}"),
        runs=tuple(runs),
        measure=where.section(data.get("measure"), "measure", Measure, MEASURE_FIELDS),
        report=where.section(data.get("report"), "report", Report, REPORT_FIELDS),
    )


class _Where:
    """Checks for one spec file, each error naming the file and the field."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, at: str, message: str) -> BadInput:
        return BadInput(f"{self.path}: {at}: {message}")

    def unknown(self, data: dict, allowed: set[str], at: str) -> None:
        extra = sorted(set(data) - allowed)
        if extra:
            name = f"{at}.{extra[0]}" if at else extra[0]
            raise self.fail(name, f"unknown field (known: {', '.join(sorted(allowed))})")

    def text(self, data: dict, key: str, at: str, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str | int | float) or isinstance(value, bool) or value == "":
            raise self.fail(at, "give a non-empty text")
        return str(value)

    def names(self, value: Any, at: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = value.split()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(at, "give a list of memory specs, e.g. [buffer, window:k=4]")
        return tuple(value)

    def options(self, value: Any, at: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(at, "give a mapping of memory-lab run options, e.g. {jobs: 2}")
        found = {}
        for name, v in value.items():
            found[name] = self.option(name, v, f"{at}.{name}")
        return found

    def option(self, name: str, value: Any, at: str) -> Any:
        kind = RUN_OPTIONS.get(name)
        if kind is None:
            raise self.fail(at, f"not a run option a sweep sets ({', '.join(RUN_OPTIONS)})")
        if kind is bool:
            if not isinstance(value, bool):
                raise self.fail(at, "give true or false")
            return value
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(at, f"give a {kind.__name__}")
        try:
            return kind(value)
        except ValueError:
            raise self.fail(at, f"give a {kind.__name__}, not {value!r}") from None

    def grid(self, value: Any, at: str) -> list[dict[str, Any]]:
        """Every combination of the grid's options (one empty combination without a grid)."""
        if not isinstance(value, dict):
            raise self.fail(at, "give a mapping of run options to lists, e.g. {jobs: [1, 2]}")
        axes = []
        for name, values in value.items():
            if not isinstance(values, list) or not values:
                raise self.fail(f"{at}.{name}", "give a non-empty list of values")
            axes.append([(name, self.option(name, v, f"{at}.{name}")) for v in values])
        return [dict(c) for c in itertools.product(*axes)]

    def section(self, value: Any, at: str, kind: type, allowed: set[str]) -> Any:
        if value is None:
            return kind()
        if not isinstance(value, dict):
            raise self.fail(at, f"give a mapping ({', '.join(sorted(allowed))})")
        self.unknown(value, allowed, at)
        defaults = kind()
        for name, v in value.items():
            expected = type(getattr(defaults, name))
            if name in ("page", "about"):
                if not isinstance(v, str) or not v.strip():
                    raise self.fail(f"{at}.{name}", "give a text")
            elif expected is bool and not isinstance(v, bool):
                raise self.fail(f"{at}.{name}", "give true or false")
            elif expected in (int, float) and (
                isinstance(v, bool) or not isinstance(v, int | float) or v <= 0
            ):
                raise self.fail(f"{at}.{name}", "give a positive number")
        return kind(**value)

    def source(
        self,
        data: Any,
        at: str,
        memories: tuple[str, ...],
        options: dict[str, Any],
        grid: list[dict[str, Any]],
        variables: Mapping[str, str],
    ) -> list[Run]:
        if not isinstance(data, dict):
            raise self.fail(at, "give a mapping (key, dialogues, ...)")
        self.unknown(data, SOURCE_FIELDS, at)
        self.text(data, "key", f"{at}.key", required=True)
        self.text(data, "dialogues", f"{at}.dialogues", required=True)
        mine = self.names(data["memories"], f"{at}.memories") if "memories" in data else memories
        if not mine:
            raise self.fail(f"{at}.memories", "no memories: give them here or at the top")
        own = {**options, **self.options(data.get("options") or {}, f"{at}.options")}
        vary = data.get("vary") or [{}]
        if not isinstance(vary, list) or not all(isinstance(v, dict) for v in vary):
            raise self.fail(f"{at}.vary", "give a list of mappings, e.g. [{scale: 100K}]")
        runs = []
        for j, fields in enumerate(vary):
            here = f"{at}.vary[{j}]" if "vary" in data else at
            unset: list[str] = []
            filled = {k: self.fill(v, fields, variables, unset, here) for k, v in data.items()}
            opts = {k: self.fill(v, fields, variables, unset, here) for k, v in own.items()}
            for combination in grid:
                run_key = str(filled["key"]) + "".join(
                    f"-{k.replace('_', '-')}{v}" for k, v in combination.items()
                )
                if not _KEY.fullmatch(run_key):
                    raise self.fail(f"{at}.key", f"{run_key!r} is not a folder name")
                runs.append(
                    Run(
                        key=run_key,
                        title=str(filled.get("title") or filled["key"]),
                        dialogues=str(filled["dialogues"]),
                        memories=mine,
                        options={**opts, **combination},
                        unset=unset[0] if unset else "",
                    )
                )
        return runs

    def fill(
        self, value: Any, fields: dict, variables: Mapping[str, str], unset: list[str], at: str
    ) -> Any:
        """``value`` with ``${NAME}`` and ``{field}`` filled in (texts only); a variable nothing
        sets is left as it is, and what it leaves unset is added to ``unset``."""
        if not isinstance(value, str):
            return value

        def variable(m: re.Match) -> str:
            if m.group(1) not in variables:
                unset.append(
                    f"{self.path}: {at}: ${{{m.group(1)}}} is not set "
                    f"(give --set {m.group(1)}=VALUE)"
                )
                return m.group(0)
            return variables[m.group(1)]

        text = _VARIABLE.sub(variable, value)
        try:
            return re.sub(r"(?<!\$)\{([A-Za-z_]+)\}", lambda m: str(fields[m.group(1)]), text)
        except KeyError as e:
            raise self.fail(at, f"{{{e.args[0]}}} names no field of vary") from None
