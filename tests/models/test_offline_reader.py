"""The offline reader answers only from the memory part of its prompt, in English and Korean.

These test behaviours on small made-up memories, not the built-in suite's probes: paraphrased
questions, Korean endings and particles, numbers inside longer sentences, answers in the reply
to a question, abstention when nothing relevant is there, determinism and recorded parameters.
"""

import pytest

from memory_lab.models import ABSTAIN_REPLY, OfflineReader
from memory_lab.models.prompt import render_prompt, split_prompt
from memory_lab.models.reader_index import split_sentences
from memory_lab.scoring.probes import is_abstention
from memory_lab.text.analysis import features, stem

MEMORY_EN = """Human: The weather is nice today.
AI: It really is.
Human: My dentist, Dr. Okafor, moved her clinic to Elm Street.
AI: Good to know.
Human: We adopted a greyhound last spring and named him Biscuit.
AI: What a lovely name.
Human: The plumber says fixing the boiler will cost 340 dollars, which is more than I hoped.
AI: That is a lot for one repair.
Human: I usually take the 7:30 train to work.
AI: Early start!"""

MEMORY_KO = """Human: 오늘 날씨가 정말 좋네요.
AI: 그러게요.
Human: 저는 작년에 부산으로 이사했어요.
AI: 바다가 가까워서 좋겠어요.
Human: 제 동생 이름은 민준이에요.
AI: 좋은 이름이네요.
Human: 요즘은 일주일에 세 번 수영장에 다니고 있어요.
AI: 꾸준하시네요."""


@pytest.fixture
def reader(run_models):
    return OfflineReader(embeddings=run_models.shared_embeddings())


def ask(reader, memory, question):
    return reader.invoke(render_prompt(memory, question)).content


def test_split_prompt_returns_memory_and_question():
    memory, question = split_prompt(render_prompt("Human: hi\nAI: hello", "What did I say?"))
    assert memory == "Human: hi\nAI: hello"
    assert question == "What did I say?"


def test_reader_replies_with_the_matching_sentence(reader):
    reply = reader.invoke(render_prompt(MEMORY_EN, "Who is my dentist?"))
    assert "Okafor" in reply.content
    assert reply.usage_metadata["input_tokens"] > 0 and reply.usage_metadata["output_tokens"] > 0


def test_a_paraphrased_question_finds_the_sentence(reader):
    # "dog" is never said: the greyhound sentence is found through word and sentence similarity
    assert "Biscuit" in ask(reader, MEMORY_EN, "What is our dog called?")


def test_a_number_inside_a_longer_sentence(reader):
    assert "340" in ask(reader, MEMORY_EN, "How much will the boiler repair be?")
    assert "7:30" in ask(reader, MEMORY_EN, "What time do I leave for the office?")


def test_korean_questions_with_other_endings_and_particles(reader):
    assert "부산" in ask(reader, MEMORY_KO, "작년에 이사 간 곳이 어디였더라?")
    assert "민준" in ask(reader, MEMORY_KO, "동생 이름이 뭐였죠?")
    assert "세 번" in ask(reader, MEMORY_KO, "수영장은 일주일에 몇 번 간다고 했죠?")


def test_the_reply_to_a_question_holds_the_answer(reader):
    memory = (
        "Caroline: Hey Mel, how was your weekend?\n"
        "Melanie: Busy! We went camping by the lake.\n"
        "Caroline: What pet do you have at home?\n"
        "Melanie: A guinea pig called Oscar, the kids adore him.\n"
        "Caroline: I just finished a painting of a sunset."
    )
    assert "guinea pig" in ask(reader, memory, "What pet does Melanie have?")


def test_reader_abstains_on_empty_or_unrelated_memory(reader):
    assert ask(reader, "", "What is my dentist's name?") == ABSTAIN_REPLY
    assert is_abstention(ask(reader, MEMORY_EN, "Which violin concerto do I practise?"))
    assert is_abstention(ask(reader, MEMORY_KO, "제가 좋아하는 피아노 곡이 뭐였죠?"))


def test_reader_abstains_on_a_tempting_fact_about_the_same_name(reader):
    # Dr. Okafor is in the memory, but only where her clinic is: her phone number never was
    assert ask(reader, MEMORY_EN, "What is Dr. Okafor's phone number?") == ABSTAIN_REPLY
    # a name the memory never mentions, next to a related fact (the greyhound Biscuit)
    assert ask(reader, MEMORY_EN, "What breed is Rex, our greyhound?") == ABSTAIN_REPLY
    # asked about what was said of the name, it still answers
    assert "Elm Street" in ask(reader, MEMORY_EN, "Where is Dr. Okafor's clinic now?")
    assert reader._identifying_params["names_rule"] is True


def test_a_sentence_that_only_restates_the_question_ranks_below_one_that_adds_to_it(run_models):
    memory = (
        "Human: Piano lessons, piano lessons, piano lessons!\n"
        "AI: Fun.\n"
        "Human: Mrs. Alvarez, a retired concert pianist from Vienna, teaches them on Thursdays."
    )
    question = "Who gives my piano lessons?"
    embeddings = run_models.shared_embeddings()
    _, with_novelty, _ = OfflineReader(embeddings=embeddings).scores(memory, question)
    _, without, _ = OfflineReader(embeddings=embeddings, novelty_weight=0).scores(memory, question)
    assert with_novelty[2] > with_novelty[0]
    assert without[2] < without[0]  # what the novelty credit changes


def test_a_first_person_question_is_about_what_the_user_said(run_models):
    memory = (
        "Human: I finally bought the new bike!\n"
        "AI: A new bike is a great purchase, and bikes make the commute fun.\n"
        "Human: It is a second-hand Trek gravel frame, 950 euros.\n"
        "AI: Nice."
    )
    prompt = render_prompt(memory, "Which brand is my new bike?")
    embeddings = run_models.shared_embeddings()
    reply = OfflineReader(embeddings=embeddings).invoke(prompt).content
    echo = OfflineReader(embeddings=embeddings, assistant_weight=1).invoke(prompt).content
    assert "great purchase" in echo and "great purchase" not in reply
    assert features("What did I pay?").first_person
    assert features("우리 결혼식이 언제였지?").first_person
    assert not features("What did Caroline pay?").first_person
    assert not features("제주도 여행은 언제야?").first_person  # 제주도 is a place, not "my"


def test_reader_never_answers_from_the_question_itself(reader):
    reply = ask(reader, "", "Is my cat called Mochi?")
    assert "Mochi" not in reply


def test_same_prompt_same_reply_and_parameters_are_recorded(run_models):
    prompt = render_prompt(MEMORY_EN, "Where did the dentist move?")
    first = OfflineReader(embeddings=run_models.shared_embeddings())
    second = OfflineReader(embeddings=run_models.shared_embeddings())
    assert first.invoke(prompt).content == second.invoke(prompt).content
    assert first.invoke(prompt).content == first.invoke(prompt).content
    params = first._identifying_params
    for name in (
        "threshold",
        "threshold_hangul",
        "lexical_weight",
        "absent_term_weight",
        "soft_match",
        "type_weight",
        "recency_weight",
        "max_sentences",
        "names_rule",
    ):
        assert params[name] == getattr(first, name)


def test_features_use_general_machinery():
    assert stem("moved") == stem("move") and stem("stopped") == "stop"
    # English function words and Korean particles/endings are not content
    assert features("What did you do with the boilers?").terms == {"boiler"}
    assert features("부산으로 이사했어요").terms == features("부산에 이사했지?").terms
    assert split_sentences("Human: Hi there. I live in Leeds.\nAI: Nice!") == [
        "Hi there.",
        "I live in Leeds.",
        "Nice!",
    ]


def test_is_abstention_is_not_fooled_by_facts_that_contain_dont_have():
    assert is_abstention("I don't know.")
    assert is_abstention("잘 모르겠어요.")
    assert not is_abstention("I moved to Busan and I don't have a car there.")


def test_a_statement_is_acknowledged_and_a_question_without_an_answer_is_not():
    from memory_lab.models.offline_reader import ABSTAIN_REPLY, ACK_REPLY, OfflineReader, asks
    from memory_lab.models.prompt import render_prompt

    reader = OfflineReader()
    empty = render_prompt("", "Hi, I'm Dana and I live in Porto.")
    assert reader.answer(empty) == ACK_REPLY
    assert reader.answer(render_prompt("", "Where do I live?")) == ABSTAIN_REPLY
    assert reader.answer(render_prompt("", "Remind me where I live")) == ABSTAIN_REPLY
    assert not asks("My brother Idris is a pilot.") and asks("제 동생 이름이 뭐예요?")
