"""The offline models as an ordinary provider: ``offline:reader`` and ``offline:memory`` resolve
like ``openai:...``, and the memory model serves structured output and tool calls itself."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from memory_lab.memories.builtin.profile import UPDATE_SCHEMA, ProfileUpdate
from memory_lab.models import (
    OfflineMemoryModel,
    OfflineReader,
    ProviderError,
    is_offline,
    model_name,
    resolve_chat_model,
)
from memory_lab.models.accounting import Meter, MeterCallback
from memory_lab.models.tasks import extract_prompt, parse_json_reply

EXCHANGE = "Human: I moved to Busan last spring and I work as a nurse now.\nAI: Congratulations!"


def test_offline_names_resolve_like_a_provider_and_offline_alone_keeps_its_role(run_models):
    emb = run_models.shared_embeddings()
    assert isinstance(resolve_chat_model("offline:memory", "reader"), OfflineMemoryModel)
    assert isinstance(resolve_chat_model("offline:reader", "memory", embeddings=emb), OfflineReader)
    assert isinstance(resolve_chat_model("offline", "reader", embeddings=emb), OfflineReader)
    assert isinstance(resolve_chat_model("offline", "extractor"), OfflineMemoryModel)
    assert model_name("offline", "reader") == model_name("offline:reader", "memory")
    assert model_name("offline:memory", "reader") == "offline-memory-model"
    assert is_offline("offline:memory") and not is_offline("openai:gpt-4o-mini")
    with pytest.raises(ProviderError, match=r"'offline:judge'.*offline:reader, offline:memory"):
        resolve_chat_model("offline:judge", "memory")


def metered(runnable, prompt):
    meter = Meter()
    reply = runnable.invoke(prompt, config={"callbacks": [MeterCallback(meter)]})
    return reply, meter.take()


def test_structured_output_parses_the_same_reply_the_json_prompt_gets():
    model = OfflineMemoryModel()
    prompt = extract_prompt(EXCHANGE, UPDATE_SCHEMA)
    text, text_usage = metered(model, prompt)
    update, usage = metered(model.with_structured_output(ProfileUpdate), prompt)
    assert isinstance(update, ProfileUpdate)
    assert update == ProfileUpdate.model_validate(parse_json_reply(str(text.content)))
    assert "Busan" in (update.location or "") and "nurse" in (update.occupation or "")
    assert (usage.input_tokens, usage.output_tokens) == (
        text_usage.input_tokens,
        text_usage.output_tokens,
    )


class Fact(BaseModel):
    key: str
    value: str


class Facts(BaseModel):
    facts: list[Fact]


def test_structured_output_takes_the_schema_from_the_request_when_the_prompt_has_none():
    model = OfflineMemoryModel()
    facts = model.with_structured_output(Facts).invoke(EXCHANGE)
    assert [f.value for f in facts.facts] == [
        "I moved to Busan last spring and I work as a nurse now."
    ]
    raw = model.with_structured_output(Facts, include_raw=True).invoke("Human: hi")
    assert raw["parsed"] == Facts(facts=[]) and raw["parsing_error"] is None


@tool
def core_memory_append(label: str, content: str) -> str:
    """Append to core memory."""
    return "ok"


@tool
def core_memory_replace(label: str, old_content: str, new_content: str) -> str:
    """Replace in core memory."""
    return "ok"


@tool
def archival_memory_insert(content: str) -> str:
    """Save to archival memory."""
    return "ok"


def test_bound_tools_are_recognised_from_the_request_not_from_a_class():
    model = OfflineMemoryModel()
    system = SystemMessage('Core memory:\n<human characters="0/2000">\n\n</human>')
    memgpt = model.bind_tools([core_memory_append, core_memory_replace, archival_memory_insert])
    reply = memgpt.invoke([system, HumanMessage(EXCHANGE)])
    assert [c["name"] for c in reply.tool_calls] == ["core_memory_append", "archival_memory_insert"]
    assert reply.tool_calls[0]["args"] == {
        "label": "human",
        "content": "I moved to Busan last spring and I work as a nurse now.",
    }
    done = memgpt.invoke(
        [system, HumanMessage(EXCHANGE), reply, ToolMessage("ok", tool_call_id="call_0")]
    )
    assert done.tool_calls == [] and done.content == "No memory tools needed."
    # the archival tool alone is no MemGPT agent: without declared rules, no calls
    alone = model.bind_tools([archival_memory_insert]).invoke([HumanMessage(EXCHANGE)])
    assert alone.tool_calls == [] and alone.content == "No memory tools needed."


def test_mem0s_extraction_prompt_is_answered_by_its_script():
    prompt = (
        "You are a Memory Extractor.\n## Existing Memories\n"
        '[{"id": "0", "text": "I work as a nurse now."}]\n'
        "## New Messages\nuser: I work as a nurse now. I have two cats named Miso and Tofu.\n"
        "assistant: Lovely!\n# Output:\n"
    )
    reply = parse_json_reply(str(OfflineMemoryModel().invoke([SystemMessage(prompt)]).content))
    assert reply == {"memory": [{"id": "0", "text": "I have two cats named Miso and Tofu."}]}


def test_a_run_naming_the_offline_models_gives_the_records_of_a_default_run(tmp_path):
    from memory_lab import load_dialogues, resolve_memories, run_benchmark
    from memory_lab.log.records import without_timings
    from memory_lab.results.read import read_records

    from ..conftest import FIXTURES

    def records(name, **models):
        out = run_benchmark(
            resolve_memories(["summary", "profile"]),
            load_dialogues(FIXTURES / "dialogues"),
            tmp_path / name,
            cache=False,
            progress=False,
            **models,
        )
        assert out.failed_cells == 0
        rows = [without_timings(r) for r in read_records(out.path)]
        return [{k: v for k, v in r.items() if k != "cell_id"} for r in rows]

    default = records("default")
    named = records("named", llm="offline:reader", memory_llm="offline:memory")
    assert named == default and any(r.get("memory_llm_calls") for r in named)
