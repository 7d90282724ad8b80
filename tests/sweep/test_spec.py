"""A sweep spec: what it expands into, and the errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_lab.errors import BadInput
from memory_lab.sweep import load

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sources_vary_and_grid_expand_into_runs(tmp_path):
    sweep = load(
        write(
            tmp_path,
            """
name: scale
memories: [buffer, window:k=2]
options: {no_prompts: true, jobs: 2}
grid: {concurrency: [1, 4]}
sources:
  - key: beam-{scale}
    title: BEAM {scale}
    dialogues: "beam:${BEAM}#scale={scale},conversations={which}"
    vary: [{scale: 100K, which: 1-20}, {scale: 1M, which: "10"}]
  - key: classic
    dialogues: builtin:classic
    memories: [vector]
    options: {jobs: 1}
""",
        ),
        {"BEAM": "/data/BEAM/chats"},
    )
    assert sweep.keys() == [
        "beam-100K-concurrency1",
        "beam-100K-concurrency4",
        "beam-1M-concurrency1",
        "beam-1M-concurrency4",
        "classic-concurrency1",
        "classic-concurrency4",
    ]
    run = sweep.run("beam-1M-concurrency4")
    assert run.title == "BEAM 1M"
    assert run.dialogues == "beam:/data/BEAM/chats#scale=1M,conversations=10"
    assert run.memories == ("buffer", "window:k=2")
    assert dict(run.options) == {"no_prompts": True, "jobs": 2, "concurrency": 4}
    assert sweep.run("classic-concurrency1").options["jobs"] == 1  # the source's own
    assert sweep.run("classic-concurrency1").memories == ("vector",)
    assert sweep.out == Path("results/sweeps/scale")
    command = run.command(Path("out/x"))
    assert command[:2] == ["--dialogues", "beam:/data/BEAM/chats#scale=1M,conversations=10"]
    assert command[command.index("--memory") + 1 : command.index("--out")] == [
        "buffer",
        "window:k=2",
    ]
    assert "--no-prompts" in command and command[command.index("--jobs") + 1] == "2"


def test_a_run_whose_variable_is_unset_is_left_out_with_why(tmp_path):
    sweep = load(
        write(
            tmp_path,
            "name: s\nmemories: [buffer]\nsources:\n  - {key: a, dialogues: builtin:classic}\n"
            "  - {key: b, dialogues: 'locomo:${LOCOMO_FOR_TEST}'}\n",
        ),
        {},
    )
    assert sweep.run("a").unset == ""
    assert sweep.run("b").unset == (
        f"{tmp_path / 'sweep.yaml'}: sources[1]: ${{LOCOMO_FOR_TEST}} is not set "
        "(give --set LOCOMO_FOR_TEST=VALUE)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("memories: [buffer]\nsources: [{key: a, dialogues: x}]", "name: give a non-empty text"),
        ("name: s\nsources: [{key: a, dialogues: x}]", "memories: give a list of memory specs"),
        ("name: s\nmemories: [buffer]\nsources: []", "sources: give a list of sources"),
        ("name: s\nmemories: [buffer]\nsources: [{key: a}]", "sources[0].dialogues: give a"),
        (
            "name: s\nmemories: [buffer]\nsources: [{key: a, dialogues: x, dialog: y}]",
            "sources[0].dialog: unknown field",
        ),
        (
            "name: s\nmemories: [buffer]\noptions: {jobs: two}\nsources: [{key: a, dialogues: x}]",
            "options.jobs: give a int, not 'two'",
        ),
        (
            "name: s\nmemories: [buffer]\noptions: {dry_run: true}\n"
            "sources: [{key: a, dialogues: x}]",
            "options.dry_run: not a run option a sweep sets",
        ),
        (
            "name: s\nmemories: [buffer]\ngrid: {jobs: []}\nsources: [{key: a, dialogues: x}]",
            "grid.jobs: give a non-empty list",
        ),
        (
            "name: s\nmemories: [buffer]\nmeasure: {floor: yes please}\n"
            "sources: [{key: a, dialogues: x}]",
            "measure.floor: give true or false",
        ),
        (
            "name: s\nmemories: [buffer]\n"
            "sources: [{key: a, dialogues: x}, {key: a, dialogues: y}]",
            "two runs would share the folder 'a'",
        ),
        (
            "name: s\nmemories: [buffer]\nsources: [{key: 'a/b', dialogues: x}]",
            "sources[0].key: 'a/b' is not a folder name",
        ),
        (
            "name: s\nmemories: [buffer]\nsources: [{key: a, dialogues: '{nope}', vary: [{x: 1}]}]",
            "sources[0].vary[0]: {nope} names no field of vary",
        ),
        ("name: [unclosed", "not YAML"),
    ],
)
def test_bad_specs_name_the_file_and_the_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as caught:
        load(path, {})
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_missing_spec_says_so(tmp_path):
    with pytest.raises(BadInput, match="cannot read the sweep spec"):
        load(tmp_path / "nope.yaml")


def test_every_shipped_spec_loads():
    specs = sorted((ROOT / "benchmarks" / "sweeps").glob("*.yaml"))
    assert "classic.yaml" in {p.name for p in specs}
    for path in specs:
        sweep = load(path, {})
        assert sweep.runs, path
