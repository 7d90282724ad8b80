"""Bad input and interruptions end in one clear line and the right exit code, never a traceback."""

from __future__ import annotations

import time

import pytest

from memory_lab.cli import main

from ..conftest import FIXTURES

ALIAS_BOMB = """\
format: memory-lab/dialogue@1
id: bomb
sessions:
  - turns:
      - user: "hi"
probes:
  - id: p
    question: "q?"
    category: abstention
    metadata:
      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
      f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
      g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
      h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bomb.yaml", ALIAS_BOMB, "expands to more than"),
        ("deep.yaml", "a: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("deep.json", "[" * 100000 + "]" * 100000, "nested too deeply"),
        ("digits.json", '{"id": ' + "1" * 5000 + "}", "not valid JSON: Exceeds the limit"),
        ("digits.yaml", "id: " + "1" * 5000, "not valid YAML: Exceeds the limit"),
        ("nan.yaml", "format: memory-lab/dialogue@1\nmetadata: {x: .nan}\n", "x is nan"),
        ("inf.json", '{"id": "i", "metadata": {"x": -Infinity}}', "x is -inf"),
        ("latin1.yaml", "id: caf\xe9", "not UTF-8 text"),
        ("mixed.yaml", "format: memory-lab/dialogue@1\nid: m\n1: x\n", "key 1 at the top must be"),
        (
            "sur.json",
            '{"format": "memory-lab/dialogue@1", "id": "s", "title": "\\ud800"}',
            "lone surrogate",
        ),
    ],
)
def test_hostile_dialogue_files_are_refused_quickly_naming_the_file(
    tmp_path, capsys, name, text, message
):
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1" if name.startswith("latin1") else "utf-8"))
    started = time.perf_counter()
    out = tmp_path / "run"
    assert main(["run", "--memory", "buffer", "--dialogues", str(path), "--out", str(out)]) == 2
    assert time.perf_counter() - started < 20
    err = capsys.readouterr().err
    assert str(path) in err and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("window:k=2,k=7", "parameter 'k' is given twice"),
        ("vector:k=99999999999999999999", "parameter 'k' must be between"),
        ("hybrid:dense_weight=nan", "parameter 'dense_weight' must be a finite number"),
    ],
)
def test_a_bad_memory_parameter_is_one_line_before_any_run(tmp_path, capsys, spec, message):
    out = tmp_path / "run"
    assert main(["run", "--memory", spec, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memory-lab: error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_an_unwritable_results_folder_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = main(
        ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
        + ["--out", str(blocker / "run"), "--quiet"]
    )
    err = capsys.readouterr().err
    assert code == 2 and str(blocker) in err and len(err.strip().splitlines()) == 1


def test_report_on_an_empty_run_says_so(tmp_path, capsys):
    (tmp_path / "records.jsonl").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no records" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line_saying_how_to_resume(tmp_path, capsys, monkeypatch):
    import json

    import memory_lab.run.execute as execute

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(execute, "choose_executor", interrupted)  # once run.json is written
    out = tmp_path / "run"
    argv = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    code = main([*argv, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"continue with: memory-lab run --resume {out}" in err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_ctrl_c_before_a_run_exists_does_not_offer_a_resume(tmp_path, capsys, monkeypatch):
    import memory_lab.run.benchmark as benchmark

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(benchmark, "run_benchmark", interrupted)
    code = main(["run", "--memory", "buffer", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 130 and err == "memory-lab: interrupted before the run started\n"


def test_too_many_jobs_are_clamped_with_a_note(tmp_path, capsys):
    code = main(
        ["run", "--memory", "window:k=1", "--dialogues", str(FIXTURES / "dialogues")]
        + ["--jobs", "1000", "--out", str(tmp_path / "run"), "--quiet"]
    )
    assert code == 0
    assert "--jobs 1000 clamped to 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"config": {', "cannot be read as JSON"),
        ("[1, 2]", "must hold an object, got list"),
        ('{"memory_specs": [], "dialogue_sources": ["x"], "dialogues": []}', "lacks the field"),
    ],
)
def test_resume_of_a_broken_run_json_names_the_file(tmp_path, capsys, text, message):
    (tmp_path / "run.json").write_text(text)
    assert main(["run", "--resume", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "run.json") in err and message in err and "Traceback" not in err


def test_an_infinite_request_timeout_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--memory", "buffer", "--request-timeout", "inf", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--request-timeout must be a positive number of seconds" in err and "inf" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_gpu_that_is_not_there_is_one_line_before_any_run(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has onnxruntime's CUDA provider")
    out = tmp_path / "run"
    assert main(["run", "--memory", "vector", "--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--device cuda: onnxruntime here has no CUDA provider" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_the_device_is_checked_and_recorded_only_when_not_the_cpu():
    from memory_lab.errors import ConfigError
    from memory_lab.log.config import RunConfig

    with pytest.raises(ConfigError, match="--device must be one of cpu, cuda, got 'tpu'"):
        RunConfig(device="tpu")
    assert RunConfig().to_json()["run"]["device"] == "cpu"
    gpu = RunConfig(device="cuda").to_json()
    assert gpu["run"]["device"] == "cuda" and RunConfig.from_json(gpu).device == "cuda"
    assert RunConfig.from_json(RunConfig().to_json()).device == "cpu"


def test_run_json_is_never_written_with_nan_or_infinity(tmp_path, capsys):
    import json

    from memory_lab.log.run_spec import RunSpecError, write_run_info

    prices = tmp_path / "prices.json"
    prices.write_text(
        '{"models": {"gpt-4o-mini": {"input_per_mtok": Infinity}, '
        '"text-embedding-3-small": {"input_per_mtok": 0.02}}}'
    )
    out = tmp_path / "run"
    argv = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*argv, "--prices", str(prices), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(out / "run.json") in err and "pricing.llm.input_per_mtok is inf" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
    with pytest.raises(RunSpecError, match=r"run\.json: config\.x is nan"):
        write_run_info(tmp_path, {"config": {"x": float("nan")}})
    assert not (tmp_path / "run.json").exists()
    write_run_info(tmp_path, {"config": {"x": 1.5}})
    assert json.loads((tmp_path / "run.json").read_text()) == {"config": {"x": 1.5}}


def test_an_empty_out_is_refused_and_nothing_is_written_here(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*argv, "--out", "", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memory-lab: error: --out") and "names no folder" in err
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def _enospc() -> OSError:
    import errno
    import os

    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _records_fill_the_disk(monkeypatch, after_commits: int) -> None:
    """Writes to records.jsonl fail with ENOSPC, as on a full disk, once ``after_commits``
    parts were appended and synced (the real os.write fails so in RecordLog.append_part)."""
    import os

    synced = {"count": 0}
    real_write, real_fsync = os.write, os.fsync

    def records(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").endswith("/records.jsonl")

    def write(fd, data):
        if records(fd) and synced["count"] >= after_commits:
            raise _enospc()
        return real_write(fd, data)

    def fsync(fd):
        real_fsync(fd)
        synced["count"] += records(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)


def _run_json_fills_the_disk(monkeypatch, after_writes: int) -> None:
    """run.json (written through its temporary copy) cannot be written after ``after_writes``
    writes: ENOSPC."""
    import pathlib

    written = {"count": 0}
    real_write_text = pathlib.Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name == "run.json.tmp":
            written["count"] += 1
            if written["count"] > after_writes:
                self.touch()  # the failed write leaves its file behind
                raise _enospc()
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def test_a_full_disk_while_appending_records_is_one_line_and_the_run_resumes(
    tmp_path, capsys, monkeypatch
):
    import json

    from memory_lab.results.read import read_records

    out = tmp_path / "run"
    argv = ["run", "--memory", "buffer", "window:k=1", "window:k=2"]
    argv += ["--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--quiet"]
    with monkeypatch.context() as patch:
        _records_fill_the_disk(patch, after_commits=1)  # the first cell fits, then no more
        assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"memory-lab: error: {out / 'records.jsonl'}: No space left on device\n"
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    kept = read_records(out)
    assert [r["memory"] for r in kept if r["type"] == "cell"] == ["buffer"]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    cells = [r["memory"] for r in read_records(out) if r["type"] == "cell"]
    assert cells == ["buffer", "window:k=1", "window:k=2"]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_a_full_disk_for_records_and_run_json_names_both_and_keeps_the_records(
    tmp_path, capsys, monkeypatch
):
    import json

    from memory_lab.results.read import read_records

    out = tmp_path / "run"
    argv = ["run", "--memory", "buffer", "window:k=1"]
    argv += ["--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--quiet"]
    with monkeypatch.context() as patch:
        _records_fill_the_disk(patch, after_commits=1)
        _run_json_fills_the_disk(patch, after_writes=2)  # written when started and running
        assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memory-lab: error: {out / 'records.jsonl'}: No space left on device")
    assert f"{out / 'run.json'} could not be updated either: No space left on device" in err
    assert "its status was not set to 'interrupted'" in err
    assert len(err.strip().splitlines()) == 1
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    assert not (out / "run.json.tmp").exists()
    assert [r["memory"] for r in read_records(out) if r["type"] == "cell"] == ["buffer"]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert [r["memory"] for r in read_records(out) if r["type"] == "cell"] == [
        "buffer",
        "window:k=1",
    ]


def test_a_full_disk_while_cells_write_their_parts_stops_the_run(tmp_path, capsys, monkeypatch):
    """A part that cannot be written stops the run naming the file (cells are not failed one
    after another, each unable to record its failure either)."""
    import json

    from memory_lab.log import record_log, safe_files

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def write(self, text):
            raise _enospc()

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def open_part(path, *args, **kwargs):  # a part is opened through log/safe_files.py
        return FullDisk(safe_files.open_new(path, *args, **kwargs))

    monkeypatch.setattr(record_log, "open_new", open_part)
    out = tmp_path / "run"
    argv = ["run", "--memory", "buffer", "window:k=1", "--concurrency", "2", "--quiet"]
    argv += ["--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memory-lab: error: {out / 'parts'}/cell-") and err.count("\n") == 1
    assert err.endswith(": No space left on device\n")
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted" and not run.get("errors")


def _failing_report(monkeypatch, exc: BaseException) -> None:
    """``memory-lab report`` raising ``exc`` (the command's own code, as a bug or a refusal)."""
    from memory_lab.cli import parser

    def fail(args):
        raise exc

    monkeypatch.setattr(parser, "report_command", fail)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        ("BadInput", 2),
        ("ConfigError", 2),
        ("EnvironmentProblem", 3),
        ("ProviderFailure", 4),
    ],
)
def test_each_kind_of_error_is_one_line_with_its_exit_code(
    exc, code, tmp_path, capsys, monkeypatch
):
    import memory_lab.errors as errors

    _failing_report(monkeypatch, getattr(errors, exc)("the judge at http://127.0.0.1:9 refused"))
    assert main(["report", str(tmp_path)]) == code
    err = capsys.readouterr().err
    assert err == "memory-lab: error: the judge at http://127.0.0.1:9 refused\n"


@pytest.mark.parametrize(
    "exc", [ValueError("x must be positive"), KeyError("k"), ZeroDivisionError()]
)
def test_a_bug_shows_its_traceback_and_asks_for_a_report(exc, tmp_path, capsys, monkeypatch):
    """A plain ValueError or KeyError from the code is a bug, not bad input: its traceback is
    printed (exit 70), never passed off as one line about the user's input."""
    _failing_report(monkeypatch, exc)
    assert main(["report", str(tmp_path)]) == 70
    err = capsys.readouterr().err
    assert err.startswith("memory-lab: internal error (a bug: please report it")
    assert "Traceback (most recent call last)" in err and type(exc).__name__ in err


def test_every_error_class_of_the_package_is_of_one_hierarchy():
    """Every exception class memory-lab defines is a kind of ``errors.py`` (or a signal the code
    catches itself: a pool's refusal, a cancelled cell, a served request's refusal)."""
    import inspect
    import pkgutil
    from importlib import import_module

    import memory_lab
    from memory_lab.errors import MemoryLabError

    internal = {"PoolBusy", "CellCancelled", "RequestError"}
    outside = []
    for info in pkgutil.walk_packages(memory_lab.__path__, "memory_lab."):
        if info.name.endswith(".worker"):
            continue  # a worker runs in its system's own environment, without memory_lab
        module = import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != info.name or not issubclass(cls, BaseException):
                continue
            if not issubclass(cls, MemoryLabError) and name not in internal:
                outside.append(f"{info.name}.{name}")
    assert outside == []
