"""LoCoMo import: layouts, speakers, captions, categories, and nothing dropped silently."""

from __future__ import annotations

import json
import zipfile

import pytest

from memory_lab import load_dialogues
from memory_lab.cli import main
from memory_lab.dialogue import DialogueError
from memory_lab.importers import import_source

from ..conftest import FIXTURES

LOCOMO = FIXTURES / "locomo" / "locomo_mini.json"


def test_conversation_becomes_one_dialogue_with_named_speakers_and_captions(capsys):
    d = load_dialogues(f"locomo:{LOCOMO}")[0]
    assert d.id == "locomo-conv-26"
    assert [s.id for s in d.sessions] == ["session-1", "session-2"]  # date-only session_3 ignored
    assert d.sessions[0].date == "1:56 pm on 8 May, 2023"
    first = d.turns[0]
    assert first.role == "user" and first.text.startswith("Caroline: ") and first.id == "D1:1"
    assert d.turns[1].role == "assistant" and d.turns[1].text.startswith("Melanie: ")
    assert "[shares a photo: a medal on a table]" in d.turns[6].text  # image-only turn kept
    assert all(p.after == d.turns[-1].id for p in d.probes)  # asked at the end
    err = capsys.readouterr().err
    assert "1 dialogue(s), 7 turn(s), 12 probe(s)" in err


def test_categories_map_with_raw_ids_kept_and_adversarial_is_abstention():
    d = load_dialogues(f"locomo:{LOCOMO}")[0]
    by_raw = {p.metadata["locomo_category"]: p for p in d.probes}
    assert by_raw[1].category == "multi-hop" and by_raw[4].category == "single-hop"
    adversarial = by_raw[5]
    assert adversarial.category == "abstention" and adversarial.answers == ()
    assert adversarial.metadata["wrong_answers"] == ["a sunrise"]
    swapped = load_dialogues(f"locomo:{LOCOMO}#categories=swapped")[0]
    assert {p.metadata["locomo_category"]: p for p in swapped.probes}[1].category == "single-hop"


def test_numeric_answers_and_answers_not_in_evidence_are_kept_as_derived():
    probes = {p.question: p for p in load_dialogues(f"locomo:{LOCOMO}")[0].probes}
    assert probes["When did Melanie paint a sunrise?"].answers == ("2022",)
    assert not probes["When did Melanie paint a sunrise?"].derived
    relative = probes["When did Caroline go to the LGBTQ support group?"]
    assert relative.derived  # "7 May 2023" is said as "yesterday"


def test_every_skipped_item_is_reported_with_its_reason():
    report = import_source("locomo", LOCOMO).report
    reasons = dict(report.skipped)
    assert "neither text nor an image caption" in reasons["conv-26 session_2[3]"]
    assert "appears in its own question" in reasons["conv-26 qa[6]"]
    assert "unknown category 9" in reasons["conv-26 qa[7]"]
    assert "D9:9" in reasons["conv-26 qa[3] evidence"]
    assert reasons["conv-26 qa[13] evidence"] == "names no turn: D"
    assert len(report.skipped) == 5  # the repaired evidence strings are not skipped


@pytest.mark.parametrize(
    ("question", "evidence"),
    [
        ("What did Melanie run after Caroline's group meeting?", ("D1:3", "D2:1")),  # D1:3;D2:1
        ("What is Caroline thinking about since the group meeting?", ("D1:3", "D2:2")),  # glued
        ("What kind of race did Melanie run?", ("D2:1",)),  # "D 2:1"
        ("Which career did Caroline consider after the group?", ("D1:3", "D2:2")),  # + "D2:02"
        ("What did Melanie paint?", ("D1:4",)),  # "D" names no turn
    ],
)
def test_evidence_lists_stray_spaces_and_leading_zeros_are_read(question, evidence):
    probes = {p.question: p for p in load_dialogues(f"locomo:{LOCOMO}")[0].probes}
    assert probes[question].evidence == evidence
    assert not probes[question].derived  # the answer is in the repaired evidence


def test_choice_question_with_its_answer_in_the_question_is_kept_as_derived():
    result = import_source("locomo", LOCOMO)
    probes = {p.question: p for p in load_dialogues(f"locomo:{LOCOMO}")[0].probes}
    choice = probes["Did Caroline go to a support group or a concert?"]
    assert choice.derived and choice.answers == ("support group",)
    assert choice.metadata["answer_in_question"] is True
    assert choice.evidence == ("D1:3",)  # still counts for evidence recall
    assert "Is the answer in the question 2022?" not in probes  # not a choice: skipped
    text = result.report.text()
    assert "1 choice question(s) with the answer in the question kept as derived" in text
    assert "5 evidence string(s) read as a list of ids or with stray spaces" in text


def test_per_conversation_files_in_a_folder_or_zip(tmp_path):
    record = json.loads(LOCOMO.read_text())[0]
    flat = {**record["conversation"], "qa": record["qa"], "sample_id": "conv-30"}
    folder = tmp_path / "convs"
    folder.mkdir()
    (folder / "conv-30.json").write_text(json.dumps(flat))
    assert load_dialogues(f"locomo:{folder}")[0].id == "locomo-conv-30"
    archive = tmp_path / "convs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(folder / "conv-30.json", "conv-30.json")
    assert len(load_dialogues(f"locomo:{archive}")[0].turns) == 7


def test_malformed_file_names_record_and_field(tmp_path):
    record = json.loads(LOCOMO.read_text())[0]
    del record["conversation"]["session_1"][2]["dia_id"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([record]))
    with pytest.raises(DialogueError, match=r"conv-26.*session_1\[2\].*dia_id"):
        load_dialogues(f"locomo:{bad}")


def test_import_command_writes_yaml_that_validates(tmp_path, capsys):
    out = tmp_path / "yaml"
    assert main(["import", "locomo", str(LOCOMO), "--out", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert load_dialogues(out)[0].probes == load_dialogues(f"locomo:{LOCOMO}")[0].probes
