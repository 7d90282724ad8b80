"""The prompt readers every judge shares (``--judge-prompt``, and BEAM's and LoCoMo-Plus's
prompts): bounded format widths, the last binding of a name, and no pipe waited on."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.errors import BadInput
from memory_lab.scoring.judge import (
    MAX_FORMAT_WIDTH,
    JudgePromptError,
    assigned_value,
    format_fields,
    literal_text,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{pred:>3000000000}", "3000000000 is over 10,000"),
        ("{pred:.99999}", "99999 is over"),
        ("{pred:>" + "9" * 5000 + "}", "over 10,000"),  # more digits than int() reads
        ("{evidence:{pred}}", "inside a format spec"),
        ("{pred", "expected '}'"),
    ],
)
def test_format_fields_refuse_unbounded_or_nested_specs_in_one_line(text, needle):
    with pytest.raises(BadInput) as caught:
        format_fields(text, "prompt.py: line 2: T")
    assert needle in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("prompt.py: line 2: T: ")


def test_format_fields_keep_bounded_specs():
    text = f"{{}} {{pred:>{MAX_FORMAT_WIDTH}}} {{gold:.3}} {{evidence!r}}"
    assert [name for _, name, _, _ in format_fields(text, "x")] == ["", "pred", "gold", "evidence"]


def test_the_value_is_the_last_binding_and_plain_text_only():
    tree = ast.parse("P = 'first'\ndef f():\n    P = 'local'\nP = ('la' 'st')\n")
    assert literal_text(assigned_value(tree.body, "P", "f.py"), "f.py: P") == "last"
    assert assigned_value(tree.body, "Q", "f.py") is None
    for source, kind in [
        ("P = Q", r"a variable \(Q\)"),
        ("P = f'{x}'", "f-string"),
        ("P = g()", "call"),
    ]:
        with pytest.raises(BadInput, match=kind):
            literal_text(assigned_value(ast.parse(source).body, "P", "f.py"), "f.py: P")
    assert literal_text(ast.parse("P = f'no placeholder'").body[0].value, "w") == "no placeholder"


def test_a_judge_prompt_fifo_is_refused_without_waiting(tmp_path):
    assert issubclass(JudgePromptError, BadInput)
    fifo = tmp_path / "prompt.txt"
    os.mkfifo(fifo)
    script = (
        "import sys\nfrom memory_lab.scoring.judge import load_judge_template\n"
        "try:\n    load_judge_template(sys.argv[1])\nexcept Exception as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,  # a reader blocked on the FIFO fails the test here instead of hanging it
        cwd=REPO,
    )
    assert done.stdout.strip() == (
        f"--judge-prompt {fifo}: is a FIFO (named pipe), not a regular file"
    ), done.stdout + done.stderr
