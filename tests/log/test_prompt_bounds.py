"""A crafted ``prompt_delta`` is refused before its prompt is built: too many pieces, spans out
of order or overlapping (a copy of the previous prompt made again and again), or a prompt
longer than ``MAX_PROMPT_CHARS``. What the encoder writes is never refused."""

from __future__ import annotations

import pytest

from memory_lab.errors import BadInput
from memory_lab.log import prompt_store
from memory_lab.log.prompt_store import DELTA_FIELD, PromptDecoder, prompt_digest

from .test_prompt_store import buffer_prompts, record, restored, stored

PREVIOUS = "x" * 1000


def _restore(pieces, digest="0" * 16):
    decoder = PromptDecoder()
    decoder.restore(record(PREVIOUS))
    delta = {"type": "turn", "memory": "buffer", "dialogue": "d", "exchange": 1}
    return decoder.restore({**delta, DELTA_FIELD: {"pieces": pieces, "digest": digest}})


@pytest.fixture
def never_built(monkeypatch):
    def refuse(*args):
        raise AssertionError("the prompt was built before its delta was checked")

    monkeypatch.setattr(prompt_store, "join_pieces", refuse)


def test_a_delta_of_two_million_pieces_is_refused_by_count(never_built):
    with pytest.raises(BadInput) as caught:
        _restore([[0, 1000]] * 2_000_000)
    assert str(caught.value) == (
        f"a turn record's field '{DELTA_FIELD}' has 2,000,000 pieces; the limit is 1,000,000 "
        "(MAX_DELTA_PIECES)"
    )


def test_spans_copying_the_previous_prompt_again_are_refused(never_built):
    with pytest.raises(BadInput) as caught:
        _restore([[0, 1000], "y", [0, 1000]])
    assert str(caught.value) == (
        f"a turn record's field '{DELTA_FIELD}': piece 3, [0, 1000], copies text before the end "
        "of the copy before it (at 1000); a delta copies the previous prompt in order"
    )


def test_a_prompt_longer_than_the_limit_is_refused_before_it_is_built(never_built, monkeypatch):
    monkeypatch.setattr(prompt_store, "MAX_PROMPT_CHARS", 1500)
    with pytest.raises(BadInput) as caught:
        _restore([[0, 1000], "y" * 501])
    assert str(caught.value) == (
        f"a turn record's field '{DELTA_FIELD}' would build a prompt of 1,501 characters; the "
        "limit is 1,500 (MAX_PROMPT_CHARS)"
    )


def test_a_span_past_the_previous_prompt_is_refused_before_it_is_built(never_built):
    with pytest.raises(BadInput, match="does not restore its prompt"):
        _restore([[0, 1001]])


def test_deltas_the_encoder_writes_still_restore():
    for keep in (None, 3000):
        prompts = buffer_prompts(60, keep)
        assert restored(stored(prompts)) == prompts
    prompt = PREVIOUS + "y"
    assert _restore([[0, 1000], "y"], prompt_digest(prompt))["prompt"] == prompt
