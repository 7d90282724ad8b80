"""The offline reader indexes a growing context from its new lines only, and answers exactly as
a from-scratch index would: same arrays, bit for bit, so the same replies.

A buffer's memory text grows at its end; past the context limit its oldest lines are cut; a
different memory's text may come in between. Each case is checked field by field against
``_build_index`` of the same text, and replies against a reader that builds every index anew.
"""

import numpy as np
import pytest

from memory_lab.models import OfflineReader
from memory_lab.models.prompt import render_prompt
from memory_lab.models.reader_index import _build_index, _extend_index, _overlap

LINES = [
    "Human: [2023-05-01] I bought a used Honda Jazz last week.",
    "AI: A Jazz is roomy for its size. Did it cost much?",
    "Human: It was 6,400 dollars. Dr. Okafor recommended the dealer.",
    "AI: Good price.",
    "Caroline: I moved to Busan in March. The sea is close.",
    "Human: [2023-05-08] 저는 작년에 부산으로 이사했어요.",
    "AI: 바다가 가까워서 좋겠어요.",
    "Human: My sister Mina runs a bakery on Elm Street.",
    "AI: What does she bake? Croissants?",
    "Human: Mostly sourdough, and she opens at 7:30.",
    "Human: [2023-05-15] The plumber charged 340 dollars for the boiler.",
    "AI: That is a lot for one repair.",
    "Human: We adopted a greyhound and named him Biscuit.",
    "AI: What a lovely name! How old is he?",
    "Human: He is three. He loves the beach in Busan.",
]
UNRELATED = "Summary: the user talked about cars.\nHuman: What is a carburettor?"

ARRAYS = ("lines", "kinds", "questions", "assistant", "line_starts", "seq", "seq_ptr", "cols")


def assert_same_index(got, want):
    assert got.sentences == want.sentences
    for name in ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("idf", "mass"):  # bit for bit: a ranking never hangs on a last bit
        assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
    assert got.mean_idf2 == want.mean_idf2
    assert got.vocab == want.vocab and got.words == want.words and got.stamps == want.stamps
    assert got.terms.tolist() == want.terms.tolist()
    assert got.word_of.tolist() == want.word_of.tolist()
    assert got.matrix.shape == want.matrix.shape
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got.matrix, name), getattr(want.matrix, name)), name


def texts():
    """Memory texts in the order a run could show them: growing, an unrelated one, cut."""
    out = ["\n".join(LINES[:n]) for n in range(2, 11)]
    out.append(UNRELATED)
    # the last cut drops Caroline's line: "Busan" then first appears after other new terms, so
    # columns are numbered in a different order than the extended index's
    out += ["\n".join(LINES[cut:n]) for cut, n in ((3, 12), (4, 14), (5, 15))]
    return out


def test_an_extended_index_equals_a_scratch_build():
    previous = None
    extended = 0
    for memory in texts():
        want = _build_index(memory)
        cut = _overlap(previous, memory) if previous is not None else None
        if memory == UNRELATED:
            assert cut is None
        if cut is None:
            previous = want
            continue
        got = _extend_index(previous, memory, cut)
        assert got is not None
        assert_same_index(got, want)
        extended += 1
        previous = got
    assert extended == 10  # 8 growths; after the unrelated text, 2 cuts of the one before


def test_a_continued_last_line_and_carriage_returns():
    # the new text continues the old one's last line, and a "\r" then "\n" is one line break
    old = _build_index("AI: Where do you live?\nHuman: I live in Busan\r")
    for memory in (f"{old.text}\nAI: Nice.", f"{old.text}AI: ok", f"{old.text}\r"):
        got = _extend_index(old, memory, _overlap(old, memory))
        assert_same_index(got, _build_index(memory))
    old = _build_index("AI: Where do you live?\nHuman: I live in Bus")
    memory = "AI: Where do you live?\nHuman: I live in Busan with my sister Mina.\nAI: Nice."
    got = _extend_index(old, memory, _overlap(old, memory))
    assert_same_index(got, _build_index(memory))


def test_a_growing_context_parses_only_its_new_lines():
    old = _build_index("\n".join(LINES[:12]))
    assert old.parsed_lines == 12
    memory = "\n".join(LINES[:14])
    got = _extend_index(old, memory, _overlap(old, memory))
    assert got.parsed_lines == 3  # the old last line (it might have gone on) and two new ones
    memory = "\n".join(LINES[4:15])  # the oldest four lines cut, one more at the end
    assert _overlap(got, memory) == len("\n".join(LINES[:4])) + 1
    cut = _extend_index(got, memory, _overlap(got, memory))
    assert cut.parsed_lines == 2
    assert _overlap(cut, UNRELATED) is None


@pytest.fixture
def readers(run_models):
    embeddings = run_models.shared_embeddings()
    retrieval = run_models.reader_retrieval
    return OfflineReader(embeddings=embeddings.view(None), retrieval=retrieval.view(None)), (
        embeddings,
        retrieval,
    )


QUESTIONS = [
    "What vehicle did I get?",  # "vehicle" is never said: soft word matching
    "How much did the car cost?",
    "Where did Caroline move?",
    "When did I pay the plumber?",
    "What is the dog called?",
    "저는 어디로 이사했어요?",
    "Who recommended the dealer?",
    "What time does Mina's bakery open?",
]


def test_replies_and_vectors_equal_a_reader_that_builds_every_index_anew(readers):
    reader, (embeddings, retrieval) = readers
    asked = 0
    compared = dict.fromkeys(("dense", "passages", "word_cols", "word_vectors"), 0)
    for n, memory in enumerate(texts()):
        for question in QUESTIONS[n % 3 :: 3]:
            prompt = render_prompt(memory, question)
            scratch = OfflineReader(
                embeddings=embeddings.view(None), retrieval=retrieval.view(None)
            )
            assert reader.answer(prompt) == scratch.answer(prompt), (memory, question)
            asked += 1
        got = reader._index(memory)
        want = scratch._index(memory)
        assert_same_index(got, want)
        for name in ("dense", "passages", "word_cols", "word_vectors"):
            a, b = getattr(got, name), getattr(want, name)
            if a is not None and b is not None:  # embedded lazily, by the questions asked
                compared[name] += 1
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
        if n and memory != UNRELATED:
            # a growth or a cut (the first cut continues the text before the unrelated one)
            assert got.parsed_lines <= 3 < len(memory.splitlines()) or n < 2
    assert asked >= 30 and min(compared.values()) >= 3, compared
