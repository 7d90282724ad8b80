from memory_lab.normalize import contains_answer, find_any, normalize


def test_normalize_folds_case_width_and_punctuation():
    assert normalize("  FastAPI!!  is   GREAT. ") == "fastapi is great"
    assert normalize("ＦａｓｔＡＰＩ") == "fastapi"  # NFKC folds full-width letters


def test_ascii_answers_match_on_word_boundaries_only():
    assert contains_answer("Room 13 on the left", "13")
    assert not contains_answer("Room 13 on the left", "3")
    assert not contains_answer("concatenate", "cat")
    assert contains_answer("at 7:30 sharp", "7:30")


def test_korean_answers_match_with_attached_particles():
    assert contains_answer("부산으로 이사했어요", "부산")
    assert contains_answer("저는 김지수예요", "김지수")


def test_find_any_returns_the_first_accepted_answer_found():
    assert find_any("I moved to Busan", ["Seoul", "busan"]) == "busan"
    assert find_any("nothing here", ["Seoul"]) is None
