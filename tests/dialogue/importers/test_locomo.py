"""LoCoMo import: layouts, speakers, captions, categories, and nothing dropped silently."""

from __future__ import annotations

import json
import struct
import zipfile

import pytest

from memory_lab import load_dialogues
from memory_lab.cli import main
from memory_lab.dialogue.importers import import_source
from memory_lab.dialogue.model import DialogueError

from ...conftest import FIXTURES

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


def zip_of(path, name, data, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr(name, data)
    return path


def cli_error(capsys, argv, code=2):
    """The one line a failing command prints (``validate``: the problem it lists), checking
    there is one and no traceback."""
    assert main(argv) == code
    out, err = capsys.readouterr()
    lines = [x for x in (out + err).splitlines() if not x.startswith(("imported ", "  "))]
    if argv[0] == "validate":
        assert lines[-1] == "1 problem(s) found; files with problems load nothing."
        lines = lines[:-1]
    assert len(lines) == 1 and "Traceback" not in err, out + err
    return lines[0]


def test_a_zip_bomb_is_refused_by_its_declared_size_before_decompressing(tmp_path, capsys):
    bomb = zip_of(tmp_path / "bomb.zip", "conv.json", bytes(70 * 1024 * 1024))
    assert bomb.stat().st_size < 200_000
    out = tmp_path / "run"
    line = cli_error(capsys, ["run", "--dialogues", f"locomo:{bomb}", "--out", str(out)])
    assert line == (
        f"memory-lab: error: {bomb}!conv.json: document: file: decompresses to 73,400,320 bytes; "
        "the limit is 67,108,864 (raise it with #max_mib=N)"
    )
    assert not out.exists()
    # max_mib lifts the limit: the entry is then read, and is not JSON
    with pytest.raises(DialogueError, match=r"bomb.zip!conv.json: .*not valid JSON"):
        load_dialogues(f"locomo:{bomb}#max_mib=71")


def test_a_zip_whose_header_understates_an_entry_is_refused_without_reading_it_all(tmp_path):
    archive = zip_of(tmp_path / "liar.zip", "conv.json", bytes(70 * 1024 * 1024))
    data = bytearray(archive.read_bytes())
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 1000)  # uncompressed size in the directory
    archive.write_bytes(bytes(data))
    assert zipfile.ZipFile(archive).getinfo("conv.json").file_size == 1000
    with pytest.raises(DialogueError, match=r"liar.zip!conv.json: .*not a readable zip entry"):
        load_dialogues(f"locomo:{archive}")


def test_entries_of_a_zip_share_one_limit(tmp_path):
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(3):
            zf.writestr(f"c{i}.json", b"[%s]" % (b" " * (600 * 1024)))  # 1 MiB allowed
    with pytest.raises(
        DialogueError,
        match=r"many.zip!c1.json: .*decompresses to 614,402 bytes, more than the 434,174 left "
        r"of the limit of 1,048,576",
    ):
        load_dialogues(f"locomo:{archive}#max_mib=1")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PK\x03\x04 not really a zip", "not a readable zip: File is not a zip file"),
        (b"", "not a readable zip"),
    ],
)
def test_a_corrupt_zip_is_one_line_naming_it(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(content)
    line = cli_error(capsys, ["validate", f"locomo:{bad}"], code=1)
    assert line.startswith(f"{bad}: document: file: ") and message in line


def test_a_deeply_nested_file_is_one_line_naming_it(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    line = cli_error(capsys, ["run", "--dialogues", f"locomo:{deep}", "--out", str(tmp_path / "r")])
    assert line == f"memory-lab: error: {deep}: document: file: JSON nested too deeply to read " + (
        "(limit 40 levels)"
    )
    record = json.loads(LOCOMO.read_text())[0]
    record["event_summary"] = json.loads("[" * 60 + "]" * 60)  # parses, deeper than a dialogue
    deep.write_text(json.dumps([record]))
    with pytest.raises(DialogueError, match=r"record 0': record: nested deeper than 40 levels"):
        load_dialogues(f"locomo:{deep}")


def malformed(tmp_path, change):
    record = json.loads(LOCOMO.read_text())[0]
    change(record)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([record]))
    return path


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda r: r["qa"][0].update(category=True), "qa[0].category", "must be an integer"),
        (lambda r: r["qa"][0].update(category=[1]), "qa[0].category", "got [1]"),
        (lambda r: r["qa"][0].update(answer={"a": 1}), "qa[0].answer", "must be a string"),
        (
            lambda r: r["conversation"]["session_1"][0].update(speaker=["Caroline"]),
            "conversation.session_1[0].speaker",
            "must be a string",
        ),
        (
            lambda r: r["conversation"].update(session_01=[]),
            "conversation.session_01",
            "same session as session_1",
        ),
        (lambda r: r.update(sample_id="conv\x1b[2J"), "sample_id", "must be a printable string"),
    ],
)
def test_malformed_values_are_one_line_naming_the_field(tmp_path, capsys, change, field, message):
    bad = malformed(tmp_path, change)
    line = cli_error(capsys, ["run", "--dialogues", f"locomo:{bad}", "--out", str(tmp_path / "r")])
    assert line.startswith(f"memory-lab: error: {bad}: ") and f": {field}: " in line
    assert message in line and "\x1b" not in line


def test_a_dia_id_with_an_escape_is_refused_and_shown_escaped(tmp_path, capsys):
    bad = malformed(tmp_path, lambda r: r["conversation"]["session_1"][0].update(dia_id="D1:1\x1b"))
    assert main(["validate", f"locomo:{bad}"]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "turns[0].id: must be a string without spaces or control" in out
    assert "'D1:1\\x1b'" in out


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("#categories=sideways", "options: categories must be one of paper, swapped"),
        ("#colour=red", "locomo has no option 'colour' (options: categories, max_mib)"),
        ("#swapped", "options: expected key=value, got 'swapped'"),
        ("#categories=paper,categories=swapped", "'categories' given twice"),
        ("#max_mib=0", "max_mib must be a whole number of MiB >= 1, got '0'"),
        ("#max_mib=²", "max_mib must be a whole number"),
    ],
)
def test_bad_options_are_one_line(tmp_path, capsys, source, message):
    line = cli_error(capsys, ["validate", f"locomo:{LOCOMO}{source}"], code=1)
    assert message in line
