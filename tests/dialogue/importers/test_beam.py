"""BEAM import: conversations at every scale, every ability a probe, evidence in every form."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from memory_lab import load_dialogues
from memory_lab.benchmarks.beam.importer import ABILITIES, CATEGORIES
from memory_lab.cli import main
from memory_lab.dialogue.importers import import_source
from memory_lab.dialogue.model import DialogueError

from .beam_fixture import batches, chats, conversation, questions, ten_m, write_json


def _one(path, **options):
    (dialogue,) = load_dialogues(
        f"beam:{path}" + ("#" + ",".join(f"{k}={v}" for k, v in options.items()) if options else "")
    )
    return dialogue


def test_a_conversation_is_one_dialogue_with_batches_as_dated_sessions(tmp_path):
    d = _one(conversation(tmp_path / "100K" / "4"))
    assert d.id == "beam-100k-4" and d.metadata == {
        "dataset": "beam",
        "scale": "100K",
        "conversation": "4",
    }
    assert [(s.id, s.date) for s in d.sessions] == [("b1", "2024-04-03"), ("b2", "2024-04-13")]
    assert [t.id for t in d.turns] == [f"c{i}" for i in range(8)]
    assert d.turns[0].role == "user" and "March 29" in d.turns[0].text
    assert [p.id for p in d.probes] == [f"{a.replace('_', '-')}-1" for a in ABILITIES]


def test_abilities_map_to_categories_with_raw_ability_difficulty_rubric_in_metadata(tmp_path):
    d = _one(conversation(tmp_path / "100K" / "1"))
    by_ability = {p.metadata["beam_ability"]: p for p in d.probes}
    assert {a: p.category for a, p in by_ability.items()} == CATEGORIES
    ie = by_ability["information_extraction"]
    assert ie.metadata["difficulty"] == "easy" and ie.metadata["rubric"] == [
        "LLM response should state: March 29"
    ]
    assert ie.metadata["type"] == "context_date/time" and ie.metadata["beam_scale"] == "100K"
    # a one-item rubric that states a value: the value is an accepted answer, found in evidence
    assert ie.answers == ("It dries by March 29.", "March 29") and not ie.derived
    assert ie.evidence == ("c0",)
    # several nuggets: the reference answer only, derived (not verbatim in the evidence)
    ms = by_ability["multi_session_reasoning"]
    assert ms.answers == ("The paint and the roof.",) and ms.derived and ms.evidence == ("c0", "c2")
    # instruction and preference keep BEAM's description of the compliant reply
    assert (
        by_ability["instruction_following"].metadata["reference_answer"]
        == "Response should use bullet points."
    )


def test_abstention_probes_have_no_answers_and_keep_the_reference_reply(tmp_path):
    d = _one(conversation(tmp_path / "c" / "1"))
    (probe,) = [p for p in d.probes if p.category == "abstention"]
    assert probe.answers == () and probe.evidence == ()
    assert probe.metadata["reference_answer"].startswith("Based on the chat")
    assert probe.metadata["beam_scale"] == "unknown"  # a folder not under a scale folder


def test_source_chat_ids_in_list_nested_and_dict_forms_become_turn_ids(tmp_path):
    d = _one(conversation(tmp_path / "100K" / "1"))
    ev = {p.metadata["beam_ability"]: p.evidence for p in d.probes}
    assert ev["event_ordering"] == ("c0", "c2", "c4")  # a list of lists
    assert ev["knowledge_update"] == ("c4",)  # {"original_info": [4], "updated_info": [4]}: once
    assert ev["temporal_reasoning"] == ("c0", "c4")  # first_event, second_event in order
    assert ev["summarization"] == ()  # no source_chat_ids: derived, no evidence
    meta = {p.metadata["beam_ability"]: p.metadata for p in d.probes}
    assert meta["knowledge_update"]["source_chat_ids"] == {
        "original_info": [4],
        "updated_info": [4],
    }


def test_an_id_naming_no_message_is_reported_and_kept(tmp_path, capsys):
    qs = questions()
    qs["information_extraction"][0]["source_chat_ids"] = [0, 99]
    result = import_source("beam", conversation(tmp_path / "100K" / "1", qs=qs))
    probe = next(p for p in result.documents[0]["probes"] if p["id"] == "information-extraction-1")
    assert probe["evidence"] == ["c0"] and probe["metadata"]["missing_evidence"] == [99]
    text = result.report.text()
    assert "information_extraction[0] source_chat_ids: names no message: [99]" in text
    assert "1 source_chat_id(s) naming no message" in text


def test_truncated_chat_is_read_when_present_as_beam_does(tmp_path):
    folder = conversation(tmp_path / "100K" / "1")
    write_json(folder / "chat_trunecated.json", batches()[:1])
    d = _one(folder)
    assert [s.id for s in d.sessions] == ["b1"]


def test_ten_m_plans_are_concatenated_in_order_with_beams_id_shift(tmp_path):
    d = _one(ten_m(tmp_path / "10M" / "1", plans=3))
    assert [s.id for s in d.sessions] == ["p0-b1", "p0-b2", "p1-b1", "p1-b2", "p2-b1", "p2-b2"]
    assert [s.date for s in d.sessions][:3] == ["2024-04-03", "2024-04-13", "2024-04-04"]
    assert [t.id for t in d.turns] == [f"c{i}" for i in range(24)]
    ie = next(p for p in d.probes if p.metadata["beam_ability"] == "information_extraction")
    assert ie.evidence == ("c8",) and d.turns[8].session_id == "p1-b1" and not ie.derived


def test_a_missing_plan_between_others_is_one_line_naming_it(tmp_path):
    folder = ten_m(tmp_path / "10M" / "1", plans=3)
    (folder / "plan-1" / "chat.json").unlink()
    with pytest.raises(DialogueError, match=r"plan-1/chat\.json: document: file: missing") as exc:
        import_source("beam", folder)
    assert "\n" not in str(exc.value)
    (folder / "plan-1" / "chat.json").parent.rename(folder / "plan-7")
    with pytest.raises(DialogueError, match=r"plan-1: document: file: missing: the 10M plans"):
        import_source("beam", folder)


def test_selection_by_scale_conversations_and_abilities(tmp_path):
    root = chats(tmp_path / "chats")
    every = import_source("beam", root).documents
    assert [d["id"] for d in every] == ["beam-100k-1", "beam-100k-2", "beam-100k-3", "beam-10m-1"]
    picked = import_source(
        "beam",
        root,
        {"scale": "100K+10M", "conversations": "1+3", "abilities": "abstention+event_ordering"},
    ).documents
    assert [d["id"] for d in picked] == ["beam-100k-1", "beam-100k-3", "beam-10m-1"]
    assert {p["metadata"]["beam_ability"] for d in picked for p in d["probes"]} == {
        "abstention",
        "event_ordering",
    }
    assert [
        d["id"]
        for d in import_source("beam", root, {"scale": "128k", "conversations": "2-3"}).documents
    ] == ["beam-100k-2", "beam-100k-3"]
    assert [
        d["id"] for d in import_source("beam", root / "100K", {"conversations": "2"}).documents
    ] == ["beam-100k-2"]
    # through a run source: options after '#', separated by ','
    assert [d.id for d in load_dialogues(f"beam:{root}#scale=10M,abilities=knowledge_update")] == [
        "beam-10m-1"
    ]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"scale": "2M"}, "options: scale '2M' is not one of 100K, 500K, 1M, 10M"),
        ({"abilities": "recall"}, "options: abilities 'recall' is not one of abstention,"),
        ({"conversations": "3-1"}, "options: conversations must be numbers or ranges"),
        ({"conversations": "9"}, "options: the selection matches no conversation"),
        ({"colour": "red"}, "options: beam has no option 'colour'"),
    ],
)
def test_bad_options_are_one_line(tmp_path, options, message):
    root = chats(tmp_path / "chats")
    with pytest.raises(DialogueError, match=message) as exc:
        import_source("beam", root, options)
    assert "\n" not in str(exc.value)


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


@pytest.mark.parametrize(
    "target, path, value, field",
    [
        (
            "chat",
            [0, "turns", 1, 0, "role"],
            "narrator",
            "[0].turns[1][0].role: must be 'user' or 'assistant'",
        ),
        ("chat", [0, "turns", 0, 1, "id"], "one", "[0].turns[0][1].id: must be a whole number"),
        (
            "chat",
            [1, "turns", 0, 0, "content"],
            {"text": 1},
            "[1].turns[0][0].content: must be a string",
        ),
        (
            "chat",
            [1, "turns", 0, 0, "time_anchor"],
            5,
            "[1].turns[0][0].time_anchor: must be a string",
        ),
        ("chat", [1, "turns"], "x", "[1].turns: a batch needs a list of turns"),
        ("chat", [0, "turns", 1, 1, "id"], 0, "[0].turns[1][1].id: duplicate chat id 0"),
        (
            "questions",
            ["knowledge_update", 0, "source_chat_ids"],
            {"original_info": [{"id": 4}]},
            "knowledge_update[0]': source_chat_ids: must be chat ids",
        ),
        (
            "questions",
            ["event_ordering", 0, "rubric"],
            [],
            "event_ordering[0]': rubric: must be a non-empty list",
        ),
        (
            "questions",
            ["temporal_reasoning", 0, "question"],
            None,
            "temporal_reasoning[0]': question: must be",
        ),
        (
            "questions",
            ["summarization"],
            {"q": 1},
            "summarization: must be a list of probing questions",
        ),
        (
            "questions",
            ["abstention", 0, "difficulty"],
            ["easy"],
            "abstention[0]': difficulty: must be a string",
        ),
    ],
)
def test_malformed_files_are_one_line_naming_file_and_field(tmp_path, target, path, value, field):
    chat, qs = batches(), questions()
    _set(chat if target == "chat" else qs, path, value)
    folder = conversation(tmp_path / "100K" / "1", chat=chat, qs=qs)
    name = "chat.json" if target == "chat" else "probing_questions.json"
    with pytest.raises(DialogueError, match=re.escape(field)) as exc:
        import_source("beam", folder)
    assert "\n" not in str(exc.value) and name in str(exc.value)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"turns": []}'])
def test_a_chat_file_that_is_not_batches_is_one_line(tmp_path, content):
    folder = conversation(tmp_path / "100K" / "1")
    (folder / "chat.json").write_text(content)
    with pytest.raises(DialogueError, match=r"chat\.json: document: (file|\[0\]\.turns)") as exc:
        import_source("beam", folder)
    assert "\n" not in str(exc.value)


def test_a_folder_without_conversations_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DialogueError, match="source: holds no BEAM conversation"):
        import_source("beam", tmp_path / "empty")


def test_reads_are_bounded_by_max_mib(tmp_path):
    folder = conversation(tmp_path / "100K" / "1")
    (folder / "chat.json").write_text(json.dumps(batches()) + " " * (1024 * 1024))
    with pytest.raises(DialogueError, match="max_mib"):
        import_source("beam", folder, {"max_mib": "1"})


def test_unknown_ability_is_skipped_and_reported(tmp_path):
    qs = questions()
    qs["time_travel"] = [{"question": "?", "rubric": ["x"]}]
    result = import_source("beam", conversation(tmp_path / "100K" / "1", qs=qs))
    assert len(result.documents[0]["probes"]) == 10
    assert "time_travel: unknown ability" in result.report.text()


def test_import_command_writes_yaml_that_validates_and_list_names_beam(tmp_path, capsys):
    root = chats(tmp_path / "chats")
    out = tmp_path / "yaml"
    assert main(["import", "beam", str(root), "--out", str(out), "--option", "scale=100K"]) == 0
    files = sorted(out.glob("*.yaml"))
    assert [f.name for f in files] == ["beam-100k-1.yaml", "beam-100k-2.yaml", "beam-100k-3.yaml"]
    doc = yaml.safe_load(files[0].read_text())
    assert doc["probes"][3]["metadata"]["rubric"] == ["LLM response should state: March 29"]
    assert main(["validate", str(out)]) == 0
    err = capsys.readouterr().err
    assert "3 dialogue(s), 24 turn(s), 30 probe(s)" in err and "by ability: abstention 3," in err
    assert main(["list"]) == 0
    assert "  beam: options scale, conversations, abilities" in capsys.readouterr().out


def test_ten_m_combined_truncated_chat_is_read_plan_by_plan_with_its_own_ids(tmp_path):
    folder = ten_m(tmp_path / "10M" / "1", plans=2)
    whole = _one(folder)
    # BEAM's combined form: plan-1, plan-2 ... with ids already shifted; cut inside plan 2
    write_json(
        folder / "chat_trunecated.json",
        [{"plan-1": batches()}, {"plan-2": batches(first_id=8, start_day=4)[:1]}],
    )
    cut = _one(folder)
    assert [s.id for s in cut.sessions] == ["p0-b1", "p0-b2", "p1-b1"]
    assert [t.id for t in cut.turns] == [t.id for t in whole.turns][:12]
    assert [s.date for s in cut.sessions] == [s.date for s in whole.sessions][:3]
    ie = next(p for p in cut.probes if p.metadata["beam_ability"] == "information_extraction")
    assert ie.evidence == ("c8",)
    write_json(folder / "chat_trunecated.json", [{"plan-1": [{"turns": "x"}]}])
    with pytest.raises(
        DialogueError, match=r"chat_trunecated\.json plan-1: document: \[0\]\.turns"
    ):
        import_source("beam", folder)
