"""The offline reader answers only from the memory part of its prompt, in English and Korean."""

from memory_lab.models import ABSTAIN_REPLY, OfflineReader
from memory_lab.prompt import render_prompt, split_prompt
from memory_lab.scoring import is_abstention

MEMORY_EN = """Human: The weather is nice today.
AI: It really is.
Human: My dentist, Dr. Okafor, moved her clinic to Elm Street.
AI: Good to know.
Human: I usually take the 7:30 train to work."""

MEMORY_KO = """Human: 오늘 날씨가 정말 좋네요.
AI: 그러게요.
Human: 저는 작년에 부산으로 이사했어요.
AI: 바다가 가까워서 좋겠어요.
Human: 제 동생 이름은 민준이에요."""


def test_split_prompt_returns_memory_and_question():
    memory, question = split_prompt(render_prompt("Human: hi\nAI: hello", "What did I say?"))
    assert memory == "Human: hi\nAI: hello"
    assert question == "What did I say?"


def test_reader_replies_with_the_matching_sentence(run_models):
    reader = OfflineReader(embeddings=run_models.shared_embeddings())
    reply = reader.invoke(render_prompt(MEMORY_EN, "Who is my dentist?"))
    assert "Okafor" in reply.content
    assert reply.usage_metadata["input_tokens"] > 0 and reply.usage_metadata["output_tokens"] > 0


def test_reader_handles_korean_particles(run_models):
    reader = OfflineReader(embeddings=run_models.shared_embeddings())
    assert "부산" in reader.invoke(render_prompt(MEMORY_KO, "제가 작년에 어디로 이사했죠?")).content
    assert "민준" in reader.invoke(render_prompt(MEMORY_KO, "제 동생 이름이 뭐였죠?")).content


def test_reader_abstains_on_empty_or_unrelated_memory(run_models):
    reader = OfflineReader(embeddings=run_models.shared_embeddings())
    assert reader.invoke(render_prompt("", "What is my dentist's name?")).content == ABSTAIN_REPLY
    reply = reader.invoke(render_prompt(MEMORY_EN, "Which violin concerto do I practise?")).content
    assert is_abstention(reply)


def test_reader_never_answers_from_the_question_itself(run_models):
    reader = OfflineReader(embeddings=run_models.shared_embeddings())
    reply = reader.invoke(render_prompt("", "Is my cat called Mochi?")).content
    assert "Mochi" not in reply


def test_is_abstention_is_not_fooled_by_facts_that_contain_dont_have():
    assert is_abstention("I don't know.")
    assert is_abstention("잘 모르겠어요.")
    assert not is_abstention("I moved to Busan and I don't have a car there.")
