"""Dialogue format v1: loading, defaults, and precise errors for malformed files."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from memory_lab.cli import main
from memory_lab.dialogue.model import CATEGORIES, DialogueError
from memory_lab.dialogue.sources import load_dialogues, validate
from memory_lab.text.normalize import contains_answer

GOOD = """
format: memory-lab/dialogue@1
id: good-one
language: en
sessions:
  - turns:
      - user: "My dentist is Dr. Okafor."
        id: dentist
      - assistant: "Noted."
      - user: "My appointment is at 7:30."
      - assistant: "Good to know."
probes:
  - id: q1
    question: "Who is my dentist?"
    answers: ["Okafor"]
    evidence: [dentist]
    category: single-hop
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_defaults_fill_session_and_turn_ids_and_probe_position(tmp_path):
    d = load_dialogues(write(tmp_path, "good.yaml", GOOD))[0]
    assert [s.id for s in d.sessions] == ["s1"]
    assert [t.id for t in d.turns] == ["dentist", "s1.t2", "s1.t3", "s1.t4"]
    assert d.probes[0].after == "s1.t4"  # default: end of dialogue
    assert len(d.content_hash) == 64


def test_json_files_load_like_yaml(tmp_path):
    import yaml

    data = yaml.safe_load(GOOD)
    d = load_dialogues(write(tmp_path, "good.json", json.dumps(data)))[0]
    assert d.id == "good-one" and len(d.probes) == 1


# Each malformed variant: (replacement applied to GOOD, field named in the error, message part)
BROKEN = {
    "unknown-key": (("language: en", "language: en\nspeakers: 2"), "speakers", "unknown key"),
    "bad-id": (("id: good-one", "id: Good One"), "id", "[a-z0-9-]"),
    "id-with-trailing-newline": (("id: good-one", 'id: "good-one\\n"'), "id", "[a-z0-9-]"),
    "language-with-trailing-newline": (
        ("language: en", 'language: "en\\n"'),
        "language",
        "BCP-47",
    ),
    "turn-id-with-an-escape": (
        ("        id: dentist", '        id: "dent\\e[2Jist"'),
        "turns[0].id",
        "without spaces or control characters",
    ),
    "session-id-with-a-control-character": (
        ("  - turns:", '  - id: "s\\x07"\n    turns:'),
        "sessions[0].id",
        "printable",
    ),
    "probe-id-with-a-bidi-override": (("  - id: q1", '  - id: "q1\\u202e"'), ".id", "printable"),
    "after-names-no-turn": (
        ("    question:", "    after: s9.t1\n    question:"),
        "after",
        "names no turn",
    ),
    "evidence-after-probe": (
        ("    evidence: [dentist]", "    after: dentist\n    evidence: [dentist, s1.t3]"),
        "evidence",
        "comes after the probe",
    ),
    "answer-in-question": (
        ('"Who is my dentist?"', '"Is Okafor my dentist?"'),
        "answers",
        "appears in the question",
    ),
    "answer-not-in-evidence": (
        ('["Okafor"]', '["Smith"]'),
        "answers",
        "none of the accepted answers ('Smith') appears in an evidence turn",
    ),
    "abstention-with-answers": (
        ("category: single-hop", "category: abstention"),
        "answers",
        "no answers",
    ),
    "unknown-category": (
        ("category: single-hop", "category: trivia"),
        "category",
        "must be one of",
    ),
    "two-roles": (
        ('      - assistant: "Noted."', '      - assistant: "Noted."\n        user: "x"'),
        "turns[1]",
        "exactly one",
    ),
    "duplicate-turn-id": (
        ('      - assistant: "Noted."', '      - assistant: "Noted."\n        id: dentist'),
        "id",
        "duplicate turn id",
    ),
    "wrong-format": (("memory-lab/dialogue@1", "memory-lab/dialogue@9"), "format", "must be"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_malformed_file_names_file_dialogue_and_field_and_loads_nothing(tmp_path, kind):
    (old, new), field, message = BROKEN[kind]
    assert old in GOOD
    path = write(tmp_path, f"{kind}.yaml", GOOD.replace(old, new))
    with pytest.raises(DialogueError) as err:
        load_dialogues(path)
    text = str(err.value)
    assert str(path) in text
    assert field in text and message in text
    dialogues, problems = validate([path])
    assert dialogues == [] and problems


def probe_variant(tmp_path, **fields):
    """GOOD with its probe's fields replaced (YAML flow values)."""
    lines = {"question": '"Who is my dentist?"', "answers": '["Okafor"]', "evidence": "[dentist]"}
    lines.update(fields)
    text = GOOD.split("probes:")[0] + "probes:\n  - id: q1\n    category: single-hop\n"
    text += "".join(f"    {key}: {value}\n" for key, value in lines.items())
    return write(tmp_path, "variant.yaml", text)


def test_accepted_answers_are_alternatives_one_of_which_must_be_in_the_evidence(tmp_path):
    path = probe_variant(tmp_path, answers='["Dr. Smith", "Okafor"]')
    assert load_dialogues(path)[0].probes[0].answers == ("Dr. Smith", "Okafor")
    path = probe_variant(tmp_path, answers='["Smith", "Jones"]')
    with pytest.raises(DialogueError) as err:
        load_dialogues(path)
    assert "none of the accepted answers ('Smith', 'Jones') appears in an evidence turn" in str(
        err.value
    )
    assert len(err.value.problems) == 1  # one problem for the probe, not one per alternative


def test_a_derived_probe_needs_no_answer_in_its_evidence(tmp_path):
    path = probe_variant(tmp_path, answers='["Smith"]', derived="true")
    assert load_dialogues(path)[0].probes[0].derived


def test_answer_in_its_own_question_is_an_error_unless_derived(tmp_path):
    choice = '"Is my dentist Okafor or Smith?"'
    with pytest.raises(DialogueError, match="'Okafor' already appears in the question"):
        load_dialogues(probe_variant(tmp_path, question=choice))
    probe = load_dialogues(probe_variant(tmp_path, question=choice, derived="true"))[0].probes[0]
    assert probe.derived and probe.answers == ("Okafor",)


def test_one_stale_answer_must_appear_in_an_earlier_turn(tmp_path):
    update = {"category": "update"}
    path = probe_variant(tmp_path, stale='["8:00", "7:30"]', **update)
    assert load_dialogues(path)[0].probes[0].stale == ("8:00", "7:30")
    path = probe_variant(tmp_path, stale='["8:00", "9:15"]', **update)
    with pytest.raises(DialogueError, match=r"none of the stale answers \('8:00', '9:15'\)"):
        load_dialogues(path)
    # "earlier" means up to the probe's position: the 7:30 turn comes after this probe
    path = probe_variant(tmp_path, stale='["7:30"]', after="dentist", **update)
    with pytest.raises(DialogueError, match="appears in an earlier turn"):
        load_dialogues(path)


def test_validation_uses_the_shared_matching(tmp_path):
    text = GOOD.replace("Dr. Okafor.", "Dr. Okafor, twice a year on the 17th.")
    path = write(tmp_path, "m.yaml", text.replace('["Okafor"]', '["Jones", "17"]'))
    assert load_dialogues(path)[0].probes[0].answers == ("Jones", "17")


def test_non_abstention_probe_without_answers_is_rejected(tmp_path):
    path = write(tmp_path, "x.yaml", GOOD.replace('answers: ["Okafor"]', "answers: []"))
    with pytest.raises(DialogueError, match="needs at least one answer"):
        load_dialogues(path)


def test_invalid_yaml_and_missing_path_are_reported(tmp_path):
    bad = write(tmp_path, "bad.yaml", "id: [unclosed")
    with pytest.raises(DialogueError, match="not valid YAML"):
        load_dialogues(bad)
    with pytest.raises(DialogueError, match="no such file or folder"):
        load_dialogues(tmp_path / "missing.yaml")
    with pytest.raises(DialogueError, match="unknown built-in suite"):
        load_dialogues("builtin:nope")


def test_one_bad_file_in_a_folder_loads_nothing_and_every_problem_is_listed(tmp_path):
    write(tmp_path, "a-good.yaml", GOOD)
    write(
        tmp_path,
        "b-bad.yaml",
        GOOD.replace("id: good-one", "id: other")
        .replace("category: single-hop", "category: x")
        .replace('["Okafor"]', '["Smith"]'),
    )
    dialogues, problems = validate([tmp_path])
    assert [d.id for d in dialogues] == ["good-one"]
    assert len(problems) == 2  # both problems of the bad file, not just the first
    with pytest.raises(DialogueError):
        load_dialogues(tmp_path)


def test_validate_command_reports_every_problem_with_exit_code_1(tmp_path, capsys):
    write(tmp_path, "a.yaml", GOOD.replace("category: single-hop", "category: x"))
    write(tmp_path, "b.yaml", GOOD.replace("id: good-one", "id: BAD"))
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "a.yaml" in out and "b.yaml" in out
    assert main(["validate", str(write(tmp_path / "..", "ok.yaml", GOOD))]) == 0


def test_validate_prints_control_characters_in_ids_escaped(tmp_path, capsys):
    """An ANSI escape in an id is refused, and the refusal shows it escaped, not raw."""
    bad = GOOD.replace("id: good-one", 'id: "\\e[2J\\e[31mred"').replace(
        "        id: dentist", '        id: "dent\\e]0;owned\\aist"'
    )
    assert main(["validate", str(write(tmp_path, "ansi.yaml", bad))]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "dialogue '\\x1b[2J\\x1b[31mred': id:" in out
    assert "turns[0].id: must be a string without spaces or control characters" in out


def test_duplicate_dialogue_ids_across_files_are_rejected(tmp_path):
    write(tmp_path, "a.yaml", GOOD)
    write(tmp_path, "b.yaml", GOOD)
    with pytest.raises(DialogueError, match="duplicate dialogue id"):
        load_dialogues(tmp_path)


def test_builtin_classic_suite_meets_its_brief():
    dialogues = load_dialogues("builtin:classic")
    assert len(dialogues) >= 8
    assert sum(d.language == "ko" for d in dialogues) >= 3
    assert all(10 <= len(d.turns) <= 150 for d in dialogues)
    probes = [p for d in dialogues for p in d.probes]
    assert len(probes) >= 60
    counts = Counter(p.category for p in probes)
    for category in (
        "single-hop",
        "multi-hop",
        "temporal",
        "update",
        "long-range",
        "preference",
        "abstention",
    ):
        assert counts[category] >= 2, f"too few {category} probes: {counts}"
    assert set(counts) <= set(CATEGORIES)
    assert all(p.stale for p in probes if p.category == "update")


def test_builtin_update_probes_name_stale_answers_said_before():
    for d in load_dialogues("builtin:classic"):
        text = " ".join(t.text for t in d.turns)
        for p in d.probes:
            for old in p.stale:
                assert contains_answer(text, old), (d.id, p.id, old)
