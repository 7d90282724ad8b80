"""Runs of the real command line killed at reproducible points, and what to check after them.

Shared by ``tests/log/test_faults.py`` and ``benchmarks/fault_injection.py``. Each run is
``memory_lab.cli.main(argv)`` in a child forked from a warm launcher process (imports and the
Korean analyser loaded once, so a run starts in a fraction of a second rather than ~5 s) and
put in a session of its own: like a command started from a shell it leads its own process
group, so ``MEMORY_LAB_FAULT`` (``memory_lab/log/faults.py``) kills the run with its workers, and
anything alive in the group after the run is an orphan. ``--jobs`` workers are spawned fresh,
as in any run. The dialogues are Korean so that the offline reader needs no English sentence
model: the runs measure the record protocol, not the reader.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from memory_lab.log.record_log import APPEND_CHUNK
from memory_lab.log.records import without_timings
from memory_lab.results.summary import TIMING_COLUMNS

MEMORIES = ["buffer", "window:k=1", "summary"]
EXECUTORS = {
    "sequential": [],
    "jobs2": ["--jobs", "2"],
    "concurrency4": ["--concurrency", "4"],
    "ray": ["--executor", "ray"],  # a local Ray: its processes are in sessions of their own
}

CAFE = """\
format: memory-lab/dialogue@1
id: ko-cafe
title: 카페 창업 준비
language: ko
sessions:
  - id: s1
    date: "2026-04-01"
    turns:
      - user: "안녕하세요, 저는 서연이에요. 대전에서 작은 카페를 준비하고 있어요."
      - assistant: "반가워요, 서연 씨! 멋진 계획이네요."
      - user: "원두는 에티오피아 예가체프를 쓰려고 해요."
        id: beans
      - assistant: "향이 좋은 원두죠."
      - user: "개업일은 5월 10일로 정했어요."
        id: opening
      - assistant: "얼마 남지 않았네요."
  - id: s2
    date: "2026-04-15"
    turns:
      - user: "요즘 인테리어 때문에 정신이 없어요."
      - assistant: "힘드시겠어요."
      - user: "개업일을 5월 24일로 미뤘어요."
        id: delay
      - assistant: "여유가 생겼네요."
      - user: "메뉴에 당근 케이크를 넣기로 했어요."
        id: cake
      - assistant: "맛있겠어요!"
probes:
  - id: q-beans
    after: s1.t6
    question: "제가 쓰려는 원두가 뭐였죠?"
    answers: ["예가체프"]
    evidence: [beans]
    category: single-hop
  - id: q-opening
    question: "개업일이 언제로 바뀌었죠?"
    answers: ["5월 24일"]
    stale: ["5월 10일"]
    evidence: [delay]
    category: update
  - id: q-cake
    question: "메뉴에 어떤 디저트를 넣기로 했나요?"
    answers: ["당근 케이크"]
    evidence: [cake]
    category: single-hop
  - id: q-rent
    question: "가게 월세가 얼마인가요?"
    category: abstention
"""

HIKING = """\
format: memory-lab/dialogue@1
id: ko-hiking
title: 주말 등산 모임
language: ko
sessions:
  - id: s1
    date: "2026-05-02"
    turns:
      - user: "이번 주말에 등산 모임에 처음 나가요."
      - assistant: "설레시겠어요!"
      - user: "첫 산행은 북한산이에요."
        id: mountain
      - assistant: "경치가 좋은 산이에요."
      - user: "모임 대장님 이름은 도윤 씨예요."
        id: leader
      - assistant: "좋은 분이면 좋겠네요."
      - user: "등산화는 어제 새로 샀어요."
      - assistant: "발에 잘 맞으면 좋겠어요."
probes:
  - id: q-mountain
    question: "첫 산행은 어느 산인가요?"
    answers: ["북한산"]
    evidence: [mountain]
    category: single-hop
  - id: q-leader
    question: "모임 대장님 이름이 뭐예요?"
    answers: ["도윤"]
    evidence: [leader]
    category: single-hop
"""


def write_dialogues(folder: Path) -> str:
    """The two small Korean dialogues in ``folder``; returns it as a dialogue source."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cafe.yaml").write_text(CAFE, "utf-8")
    (folder / "hiking.yaml").write_text(HIKING, "utf-8")
    return str(folder)


def reference_run(folder: Path) -> tuple[str, Path]:
    """The dialogues written in ``folder``, and the records of one uninterrupted run of them
    through ``MEMORIES`` in this process (one job)."""
    from memory_lab import load_dialogues, resolve_memories, run_benchmark

    dialogues = write_dialogues(folder / "dialogues")
    out = folder / "reference"
    run_benchmark(
        resolve_memories(MEMORIES),
        load_dialogues(dialogues),
        out,
        sources=[dialogues],
        progress=False,
    )
    return dialogues, out


def run_argv(dialogues: str, out: Path, executor: str) -> list[str]:
    return ["run", "--memory", *MEMORIES, "--dialogues", dialogues, "--out", str(out)] + [
        "--quiet",
        *EXECUTORS[executor],
    ]


def group_members(group: int) -> list[str]:
    """Live (not zombie) processes of a process group, as ``pid command`` lines."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        if int(fields[2]) == group and fields[0] != "Z":
            found.append(f"{stat.parent.name} {text.split(')')[0].split('(', 1)[1]}")
    return found


def wait_for_empty_group(group: int, seconds: float) -> list[str]:
    """Wait up to ``seconds`` for a process group to die out; what is still alive then."""
    deadline = time.monotonic() + seconds
    while (alive := group_members(group)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


@dataclass
class Finished:
    code: int  # exit status, or -N when killed by signal N
    stderr: str
    seconds: float
    orphans: list[str]  # processes of the run's group alive 5 s after it ended


class Launcher:
    """A warm process that forks one run of ``memory_lab.cli.main`` per request."""

    def __init__(self) -> None:
        root = Path(__file__).resolve().parent.parent
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.fault_runs import serve; serve()"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )

    def run(self, argv: list[str], fault: str | None = None, timeout: float = 180) -> Finished:
        env = {"MEMORY_LAB_FAULT": fault} if fault else {}
        request = {"argv": argv, "env": env, "timeout": timeout}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the launcher died")
        return Finished(**json.loads(line))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve() -> None:
    """The launcher: warm up, then fork a run in a new session per request line on stdin."""
    import langchain_chroma  # noqa: F401 - imported once here, not in every run
    import langchain_classic.chains  # noqa: F401
    import langchain_classic.memory  # noqa: F401

    import memory_lab.cli
    import memory_lab.run.executors  # noqa: F401
    from memory_lab.models.tokens import count_tokens
    from memory_lab.text.analysis import en_stopwords, kiwi

    kiwi().analyze("안녕하세요, 저는 민지예요.")  # loads the Korean model
    en_stopwords()  # imports scikit-learn
    count_tokens("warm")  # loads the tokenizer
    requests, replies = sys.stdin, sys.stdout
    err = Path(tempfile.gettempdir()) / f"fault-run-{os.getpid()}.err"
    for line in requests:
        request = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the run: its own session and process group, like a shell's command
            os.setsid()
            # the analyser's worker threads stayed in the launcher; freeing it at exit would
            # wait for them forever, so the run keeps it to the end
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(kiwi()))
            os.environ.update(request["env"])
            fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            sys.exit(memory_lab.cli.main(request["argv"]))
        deadline = started + request["timeout"]
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
            time.sleep(0.02)
        seconds = time.monotonic() - started
        status = done[1]
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        orphans = wait_for_empty_group(pid, 5)
        if orphans:
            os.killpg(pid, signal.SIGKILL)
        result = {"code": code, "stderr": err.read_text("utf-8"), "seconds": seconds}
        replies.write(json.dumps({**result, "orphans": orphans}) + "\n")
        replies.flush()
    err.unlink(missing_ok=True)


def record_key(record: dict) -> tuple:
    """What identifies a record within a run (which cell, which event)."""
    return (
        record["type"],
        record["memory"],
        record["dialogue"],
        record.get("turn_id") or record.get("probe_id"),
        record.get("exchange") if record["type"] != "probe" else None,
        record.get("role"),
    )


def records_of(folder: Path) -> list[dict]:
    """Every record of a results folder, timings dropped."""
    data = (folder / "records.jsonl").read_bytes()
    rows = [json.loads(line) for line in data.split(b"\n") if line]  # a torn line fails here
    return [without_timings(row) for row in rows if row["type"] != "format"]  # not its header


def summary_of(folder: Path) -> list[str]:
    """summary.csv and summary_by_category.csv without their timing column."""
    lines = []
    for name in ("summary.csv", "summary_by_category.csv"):
        rows = (folder / name).read_text("utf-8").splitlines()
        header = rows[0].split(",")
        keep = [i for i, c in enumerate(header) if c not in TIMING_COLUMNS]
        lines += [",".join(r.split(",")[i] for i in keep) for r in rows]
    return lines


@dataclass
class Damage:
    lost: int
    duplicated: int
    same_records: bool
    same_summary: bool


def compare(folder: Path, reference: Path) -> Damage:
    """Lost and duplicated records against an uninterrupted run, and whether all else matches."""
    rows, ref = records_of(folder), records_of(reference)
    keys, ref_keys = Counter(map(record_key, rows)), Counter(map(record_key, ref))
    return Damage(
        lost=sum((ref_keys - keys).values()),
        duplicated=sum(n - 1 for n in keys.values() if n > 1),
        same_records=rows == ref,
        same_summary=summary_of(folder) == summary_of(reference),
    )


def kill_points(key: str, count: int, ranges: dict[str, int]) -> list[str]:
    """``count`` reproducible ``POINT:N`` kill points (seeded by ``key``) cycling through the
    points of ``ranges``, each N drawn from 1 to its range."""
    rng = random.Random(key)
    names = list(ranges)
    start = rng.randrange(len(names))
    points = []
    for i in range(count):
        name = names[(start + i) % len(names)]
        points.append(f"{name}:{rng.randint(1, max(1, ranges[name]))}")
    return points


def run_size(folder: Path) -> dict[str, int]:
    """How often a run passes each kill point: records, parts, chunks appended, commits."""
    blocks, size = [], 0
    for line in (folder / "records.jsonl").read_bytes().splitlines(keepends=True):
        size += len(line)
        if b'"type": "cell"' in line:
            blocks.append(size)
            size = 0
    records = len(records_of(folder))
    chunks = sum(-(-b // APPEND_CHUNK) for b in blocks)
    return {"record": records, "part": len(blocks), "append": chunks, "commit": len(blocks)}


def plan(
    executor: str, runs: int, seed: int, size: dict[str, int]
) -> list[tuple[list[str], list[str] | None]]:
    """For each of ``runs`` runs of ``executor``: its kill points in order, resume options.

    Sequential, thread and Ray runs are killed anywhere (a Ray run's parts are written by its
    driver, so every point is the driver's), and every third one's first resume too (where it
    reaches the point). ``--jobs 2`` runs are killed in a worker (within a third of
    the run: a worker sees about half of it), then in the driver of their ``--jobs 2`` resume;
    the last resume uses threads, which adopt the parts the processes left (and it spares two
    worker start-ups).
    """
    if executor != "jobs2":
        first = kill_points(f"{executor}-{seed}", runs, size)
        half = {k: v // 2 for k, v in size.items()}
        again = kill_points(f"{executor}-{seed}-again", runs, half)
        return [([p, again[n]] if n % 3 == 2 else [p], None) for n, p in enumerate(first)]
    worker = {"record": size["record"] // 3, "part": size["part"] // 3}
    driver = {"append": size["append"] // 4, "commit": 2}
    worker_points = kill_points(f"jobs-{seed}", runs, worker)
    driver_points = kill_points(f"jobs-{seed}-again", runs, driver)
    pairs = zip(worker_points, driver_points, strict=True)
    return [([w, d], ["--concurrency", "2"]) for w, d in pairs]


@dataclass
class Trial:
    """One run killed at ``points[0]``, its resumes killed at the later points, then resumed."""

    executor: str
    points: list[str]
    codes: list[int]  # exit code of the run and of each resume, the last one unkilled
    errors: list[str]  # stderr of any step that printed a traceback or failed
    orphans: list[str]
    damage: Damage
    parts_left: bool
    seconds: float

    @property
    def kills(self) -> int:
        return sum(code == -signal.SIGKILL for code in self.codes)


def kill_and_resume(
    launcher: Launcher,
    dialogues: str,
    reference: Path,
    out: Path,
    executor: str,
    points: list[str],
    resume_with: list[str] | None = None,
) -> Trial:
    """Run ``executor`` killed at each of ``points`` in turn (the run, then its resumes), resume
    to the end (with ``resume_with`` options, else the run's own executor) and compare."""
    started = time.monotonic()
    resume = ["run", "--resume", str(out), "--quiet", *(resume_with or [])]
    steps = [launcher.run(run_argv(dialogues, out, executor), fault=points[0])]
    steps += [launcher.run(resume, fault=point) for point in points[1:]]
    steps.append(launcher.run(resume))
    return Trial(
        executor=executor,
        points=points,
        codes=[s.code for s in steps],
        errors=[s.stderr for s in steps if "Traceback" in s.stderr or s.code not in (0, -9)],
        orphans=[p for s in steps for p in s.orphans],
        damage=compare(out, reference),
        parts_left=(out / "parts").exists(),
        seconds=time.monotonic() - started,
    )
