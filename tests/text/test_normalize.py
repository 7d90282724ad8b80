"""Answer matching: normalisation, word boundaries, ordinals, plurals, numbers, Korean counters."""

from __future__ import annotations

import time

import pytest

from memory_lab.text.normalize import contains_answer, find_any, normalize, sentences


def test_normalize_folds_case_width_and_punctuation():
    assert normalize("  FastAPI!!  is   GREAT. ") == "fastapi is great"
    assert normalize("ＦａｓｔＡＰＩ") == "fastapi"  # NFKC folds full-width letters


def test_normalize_keeps_decimals_and_thousands_together():
    assert normalize("It costs 1.9 or 19,000 won.") == "it costs 1.9 or 19000 won"
    assert normalize("v1.2.3 on 17.06.2023, items 1,2,3") == "v1 2 3 on 17 06 2023 items 1 2 3"
    assert normalize("I don't know.") == "i don t know"


def test_ascii_answers_match_on_word_boundaries_only():
    assert contains_answer("Room 13 on the left", "13")
    assert not contains_answer("Room 13 on the left", "3")
    assert not contains_answer("concatenate", "cat")
    assert contains_answer("at 7:30 sharp", "7:30")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("I was born in 19", "9"),
        ("on the 19th", "9"),
        ("on the 19th", "9th"),
        ("version 1.9", "9"),
        ("version 1.9", "1"),
        ("19,000 people", "000"),
        ("19,000 people", "9"),
        ("19,000 people", "19"),
        ("thirteen", "3"),
        ("thirteen", "three"),
        ("thirty", "3"),
        ("3 4", "34"),
        ("the first time", "1"),
        ("no one came", "1"),
        ("He said that one is mine", "one"),
    ],
)
def test_numbers_inside_other_numbers_are_not_found(text, answer):
    assert not contains_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("It was June 17th.", "June 17"),
        ("the 17 of June", "17th"),
        ("the 17th of June", "17th"),
        ("on June seventeenth", "17th"),
        ("the first of May", "1st"),
        ("I came 1st!", "first"),
        ("my 21st birthday", "21"),
        ("my twenty-first birthday", "21st"),
        ("on the 2nd and 3rd", "2nd"),
        ("on the 2nd and 3rd", "3"),
        ("the 4th floor", "fourth"),
    ],
)
def test_ordinals_match_their_numbers(text, answer):
    assert contains_answer(text, answer)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 11, 12, 13, 21, 22, 23, 101, 111])
def test_every_ordinal_suffix_is_dropped(n):
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    assert contains_answer(f"the {n}{suffix} time", str(n))
    assert contains_answer(f"the {n} time", f"{n}{suffix}")
    assert not contains_answer(f"the {n + 10}{suffix} time", f"{n}{suffix}")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("I go there on Fridays.", "Friday"),
        ("two boxes", "box"),
        ("two boxes", "2 box"),
        ("big cities", "city"),
        ("two wishes", "wish"),
        ("autumn leaves", "leaf"),
        ("many days", "day"),
        ("potatoes", "potato"),
        ("her cats", "cat"),
        ("I play drums", "drums"),
    ],
)
def test_the_plural_of_the_answer_is_found(text, answer):
    assert contains_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("every Friday", "Fridays"),  # only the answer's plural, not its singular
        ("catsup", "cat"),
        ("Fridayss", "Friday"),
        ("cities hall", "city hall"),  # only the last word of the answer
        ("boxer", "box"),
    ],
)
def test_plurals_stay_on_word_boundaries(text, answer):
    assert not contains_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("I have three cats", "3"),
        ("I have 3 cats", "three"),
        ("twelve o'clock", "12"),
        ("12 o'clock", "twelve"),
        ("zero days", "0"),
        ("nineteen years", "19"),
        ("ninety percent", "90"),
        ("twenty-one", "21"),
        ("twenty one pilots", "21"),
        ("forty-five minutes", "45 minutes"),
        ("one hundred dollars", "100"),
        ("a hundred dollars", "100"),
        ("two hundred and fifty", "250"),
        ("5 thousand", "5000"),
        ("2.5 million", "2,500,000"),
        ("twelve thousand", "12,000"),
        ("one of my friends", "1"),
        ("I have three kids", "three kids"),
    ],
)
def test_digits_and_number_words_are_the_same_number(text, answer):
    assert contains_answer(text, answer)


def test_number_words_in_a_list_stay_separate():
    assert contains_answer("one, two, three", "2")
    assert contains_answer("one two three", "3")
    assert not contains_answer("twenty one", "20")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("사과 세 개를 샀어요", "3개"),
        ("사과 3개를 샀어요", "세 개"),
        ("사과 3 개 샀어요", "3개"),
        ("사과는 셋이야", "3개"),
        ("사과는 셋이야", "3"),
        ("두 번 갔어요", "2번"),
        ("2번 갔어요", "두 번"),
        ("두번 갔어요", "2 번"),
        ("다섯 살이에요", "5살"),
        ("스물다섯 살이에요", "25살"),
        ("스무 살 때", "20살"),
        ("열두 개", "12개"),
        ("하나 둘 셋", "2"),
        ("3시간 동안", "세 시간"),
        ("하루 스무 개면 충분해", "20개"),  # copula endings without 이
        ("세 개니까 남겠다", "3개"),
        ("두 번이고 세 번이고", "2번"),
        ("부산으로 이사했어요", "부산"),
        ("저는 김지수예요", "김지수"),
    ],
)
def test_korean_numbers_and_counters(text, answer):
    assert contains_answer(text, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("사과 3번", "3개"),  # another counter
        ("두 번째", "2번"),  # an ordinal, not a count
        ("3시간", "3시"),
        ("13개", "3개"),
        ("넷플릭스 봤어", "4"),
        ("하나님", "1"),
        ("세상에", "3"),
        ("네, 시간이 없어요", "4시간"),
        ("영화의 한 장면", "1장"),  # 장면 is a scene, not one sheet
    ],
)
def test_korean_numbers_are_not_found_where_they_are_not(text, answer):
    assert not contains_answer(text, answer)


def test_normalized_text_is_still_accepted():
    assert contains_answer(normalize("June 17th, 2023"), "June 17")
    assert not contains_answer(normalize("Room 13"), "3")


def test_find_any_returns_the_first_accepted_answer_found():
    assert find_any("I moved to Busan", ["Seoul", "busan"]) == "busan"
    assert find_any("nothing here", ["Seoul"]) is None
    assert find_any("three cats", ["two", "3"]) == "3"
    assert find_any("anything", ["", "!!"]) is None


def test_find_any_is_fast_on_a_long_context():
    lines = [
        f"Human: On the {i % 28 + 1}th I bought {i % 20} boxes of tea for 1,{i:03d} won."
        f" AI: Twenty-one people said 두 번 and three times, ok.\n"
        for i in range(600)
    ]
    context = "".join(lines)  # about 15,000 words
    answers = [f"{k} boxes" for k in range(2000)]
    start = time.perf_counter()
    for k in range(0, 2000, 200):
        find_any(context + str(k), answers[k : k + 3])  # a new context each call
    assert (time.perf_counter() - start) / 10 < 0.25  # generous: ~10 ms on a laptop


def test_sentences_do_not_break_after_abbreviations():
    assert sentences("I saw Dr. Okafor. Then I left.") == ["I saw Dr. Okafor.", "Then I left."]
