"""A small run shared by the chart and report tests: 3 memories, English and Korean."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES

SMALL_MEMORIES = ["buffer", "window:k=1", "summary"]
KOREAN_DIALOGUE = """\
format: memory-lab/dialogue@1
id: ko-mini
title: 짧은 한국어 대화
language: ko
sessions:
  - turns:
      - user: "안녕하세요, 저는 민지예요. 부산에 살아요."
      - assistant: "반가워요, 민지 씨!"
      - user: "제 고양이 이름은 <나비> & 콩이예요."
        id: cat
      - assistant: "귀여운 이름이네요."
probes:
  - id: q-cat
    question: "제 고양이 이름이 뭐예요? <b>"
    answers: ["콩이"]
    evidence: [cat]
    category: single-hop
"""


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    """Results of mini.yaml plus a Korean dialogue (with markup in it) through 3 memories."""
    from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark

    folder = tmp_path_factory.mktemp("small")
    (folder / "ko.yaml").write_text(KOREAN_DIALOGUE, "utf-8")
    dialogues = load_dialogues(FIXTURES / "dialogues" / "mini.yaml", folder / "ko.yaml")
    outcome = run_benchmark(
        resolve_memories(SMALL_MEMORIES), dialogues, folder / "run", progress=False
    )
    assert outcome.failed_cells == 0
    return read_results(outcome.path)
