"""The ``profile`` memory: a UserProfile the memory model updates, plus the last exchanges."""

from __future__ import annotations

import json

from memory_lab import load_dialogues
from memory_lab.memories.builtin.profile import (
    PROFILE_HEADER,
    UPDATE_SCHEMA,
    ProfileFact,
    ProfileUpdate,
    ProfileUpdater,
    UserProfile,
)
from memory_lab.memories.protocol import Query

from ..conftest import FIXTURES
from .replay import replayed


def test_a_scalar_update_replaces_the_stale_value_and_its_source():
    updater = ProfileUpdater()
    updater.apply(ProfileUpdate(location="Seoul", occupation="nurse"), ("t1",))
    changed = updater.apply(ProfileUpdate(location="Busan"), ("t9",))
    assert changed == ["location"]
    assert updater.profile.location == "Busan" and updater.profile.occupation == "nurse"
    assert [i.text for i in updater.items()] == ["- Occupation: nurse", "- Location: Busan"]
    assert [i.turn_ids for i in updater.items()] == [("t1",), ("t9",)]  # Seoul's source is gone
    assert updater.apply(ProfileUpdate(location=" busan "), ("t10",)) == []  # same value: kept


def test_list_fields_append_without_duplicates_and_keep_the_newest():
    updater = ProfileUpdater(list_limit=3)
    updater.apply(ProfileUpdate(likes=["hiking", "jazz"], family=["sister Hana"]), ("t1",))
    updater.apply(ProfileUpdate(likes=["Hiking", "jazz ", "tea"]), ("t2",))
    prefs = updater.profile.preferences
    assert prefs.likes == ["hiking", "jazz", "tea"]  # case and spacing fold: no duplicates
    updater.apply(ProfileUpdate(likes=["chess"]), ("t3",))
    assert prefs.likes == ["jazz", "tea", "chess"]  # bounded: the oldest item leaves
    assert updater.profile.family == ["sister Hana"]
    likes = next(i for i in updater.items() if i.text.startswith("- Likes"))
    assert likes.turn_ids == ("t1", "t2", "t3")
    assert isinstance(updater.profile, UserProfile)


def test_a_fact_under_a_known_key_replaces_the_old_one_and_nothing_is_said_twice():
    updater = ProfileUpdater(list_limit=2)
    updater.apply(ProfileUpdate(location="I live in Busan."), ("t1",))
    facts = [
        ProfileFact(key="locker", value="Locker 12"),
        ProfileFact(key="x", value="i live in busan"),
    ]
    updater.apply(ProfileUpdate(important_facts=facts), ("t2",))
    updater.apply(
        ProfileUpdate(important_facts=[ProfileFact(key="locker", value="Locker 40")]), ("t3",)
    )
    assert [(f.key, f.value) for f in updater.profile.important_facts] == [("locker", "Locker 40")]
    assert updater.items()[-1].text == "  - Locker 40" and updater.items()[-1].turn_ids == ("t3",)
    more = [ProfileFact(key="a", value="A"), ProfileFact(key="b", value="B")]
    updater.apply(ProfileUpdate(important_facts=more), ("t4",))
    assert [f.key for f in updater.profile.important_facts] == ["a", "b"]  # the newest 2
    assert ("locker", "Locker 40") not in updater.known()
    # the schema the extraction prompt shows is one self-contained tree (no $ref for a model to
    # follow), and facts are objects with a key, so a changed fact can keep its key
    facts_schema = UPDATE_SCHEMA["properties"]["important_facts"]
    assert "$defs" not in UPDATE_SCHEMA and facts_schema["items"]["properties"]["key"]


def test_a_move_and_a_new_job_replace_the_old_city_and_job(nurse, run_models):
    cell = replayed("profile:k=1", nurse, run_models)
    state = cell.memory.snapshot()["profile"]
    recall = cell.memory.recall(Query("Which city do I live in?", "s2"))
    usage, by_role = cell.maintenance()
    cell.close()
    assert "Busan" in state["location"] and "Seoul" not in state["location"]
    assert "teacher" in state["occupation"] and "nurse" not in state["occupation"]
    assert state["preferences"]["likes"] == ["I love hiking on weekends."]  # said twice, kept once
    texts = [i.text for i in recall.items]
    assert texts[0] == PROFILE_HEADER
    location = next(i for i in recall.items if i.text.startswith("- Location"))
    assert location.turn_ids == ("city-v2",) and location.kind == "profile"
    assert texts[-1] == "Human: [2026-04-10] The weather is nice.\nAI: Spring is here."  # k=1
    # one extraction per user turn, each a memory-model call metered as maintenance
    assert [(role, u.llm_calls) for role, _, u in by_role] == [("memory", 7)]
    assert usage.input_tokens > 7 * 300 and usage.output_tokens > 0


def test_a_real_model_answers_through_structured_output(tmp_path, monkeypatch):
    """Against the loopback OpenAI mock: the JSON schema is sent, its reply updates the profile."""
    from memory_lab import read_results, resolve_memories, run_benchmark

    from ..models.openai_mock import CHAT_USAGE, OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-profile")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    dialogue = load_dialogues(FIXTURES / "memories" / "moving-nurse.yaml")[0]
    with OpenAIMock() as mock:
        mock.reply = json.dumps({"location": "Busan", "likes": ["hiking", "hiking"]})
        outcome = run_benchmark(
            resolve_memories(["profile"]),
            [dialogue],
            tmp_path / "run",
            base_url=mock.base_url,
            memory_llm="openai:gpt-4o-mini",
            progress=False,
        )
    assert outcome.failed_cells == 0
    chat = [r["body"] for r in mock.requests if r["kind"] == "chat"]
    assert len(chat) == 7  # one per user turn
    schema = chat[0]["response_format"]["json_schema"]
    assert schema["name"] == "ProfileUpdate" and "location" in schema["schema"]["properties"]
    results = read_results(outcome.path)
    assert results.turns["memory_input_tokens"].sum() == 7 * CHAT_USAGE["prompt_tokens"]
    prompt = results.probes["prompt"].iloc[0]
    assert "- Location: Busan" in prompt and "- Likes: hiking\n" in prompt
