"""TextTokens (memory_lab/models/tokens.py) against the plain counting it replaces in the
context limit: the same counts, token ids, cut text and cut tokens on every text, growing,
cut at its front, edited or replaced; random (seeded) adversarial texts and real dialogues."""

import random
import sys
from pathlib import Path

import pytest

from memory_lab.dialogue.sources import load_dialogues
from memory_lab.memories.protocol import Item, Recall
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY, render_prompt
from memory_lab.models.tokens import (
    _LINE_END,
    _WHOLE,
    TextTokens,
    _count_lines,
    count_tokens,
    encoding,
    token_ids,
)
from memory_lab.run.bridge import PromptMemory

ROOT = Path(__file__).resolve().parents[2]


def old_count(text: str) -> int:
    """count_tokens as it was before TextTokens (no cache of its own but the per-line one)."""
    if not text:
        return 0
    if len(text) < _WHOLE:
        return len(encoding().encode(text, disallowed_special=()))
    return sum(_count_lines(piece) for piece in _LINE_END.split(text))


def whole_ids(text: str) -> list[int]:
    return encoding().encode(text, disallowed_special=())


def old_limit(context: str, limit: int, text: str, style: str) -> tuple[str, bool, int]:
    """PromptMemory's context limit before TextTokens: (context, truncated, cut_tokens)."""
    budget = limit - count_tokens(render_prompt("", text, style))
    whole = old_count(context)
    if whole <= budget:
        return context, False, 0
    ids = whole_ids(context)
    kept = encoding().decode(ids[len(ids) - max(0, budget) :]) if budget > 0 else ""
    cut = kept.find("\n")
    context = kept[cut + 1 :] if cut != -1 else ""
    return context, True, whole - old_count(context)


def test_a_line_start_is_never_inside_a_piece_for_any_character():
    """The split TextTokens reuses ids at ("\\n", then a character Python's \\S matches) is a
    boundary of cl100k's pre-tokenizer for every character in the Basic Multilingual Plane (the
    pattern's Unicode whitespace all lies there) after every kind of line end: the ids of the
    pieces, concatenated, are the whole text's ids."""
    befores = ["a", "a ", "a  ", ".", "a.", "1", "'", " ", "\t", "\r", "\n", "  \n", "\r\n", "-"]
    afters = ["", "b", " b", "\n", "s", "1", ".", "\u3000"]
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    lines, split_chars = [], 0
    for n, c in enumerate(chars):
        lines.append(f"{befores[n % len(befores)]}\n{c}{afters[n % len(afters)]}")
        split_chars += _LINE_END.match("\n" + c, 1) is not None
    assert split_chars > 60000  # the test splits at (nearly) every character
    for start in range(0, len(lines), 4096):
        text = "x".join(lines[start : start + 4096])
        pieces = _LINE_END.split(text)
        assert len(pieces) > 1000
        joined = [t for piece in pieces for t in token_ids(piece)]
        assert joined == whole_ids(text), start


# fmt: off
FRAGMENTS = [
    "\n", "\n", "\n", "\n\n", "\r\n", "\r", " ", "  ", "\t", " \n", "  \n\n", "\n ", "\n\t",
    "Human: ", "AI: ", "[2026-05-04] ", "hello", " world", "don't", "'s", "'LL", "123456",
    "3.14", "!!", "?!\n", "...", " (", ")", "—", "\u00a0", "\u2028", "\u2029", "\u3000",
    "\u0085", "\x1c", "\x1f", "\x0b", "\x0c", "\u200b", "\ufeff", "안녕하세요", " 김치찌개를",
    "먹었어요.", "日本語", "🙂", "👩‍👩‍👧", "é", "e\u0301", "<|endoftext|>", "<|fim_prefix|>",
    "x" * 40, " " * 30, "\n" * 7, "ab\ud800cd",
]
# fmt: on


def random_text(rng: random.Random, size: int) -> str:
    out, n = [], 0
    while n < size:
        piece = rng.choice(FRAGMENTS)
        out.append(piece)
        n += len(piece)
    return "".join(out)


def next_text(rng: random.Random, text: str) -> str:
    """A random successor: mostly grown at its end (as a buffer grows), sometimes cut at its
    front (at a line or anywhere), edited inside, shortened at its end, or replaced."""
    roll = rng.random()
    if roll < 0.55:
        sep = rng.choice(["\n", "\n", "", " ", "\n\n", "\r\n", "\n "])
        return text + sep + random_text(rng, rng.randint(1, 400))
    if roll < 0.7:
        at = text.find("\n", rng.randrange(len(text) or 1))
        at = rng.randrange(len(text) or 1) if at == -1 or rng.random() < 0.3 else at + 1
        return text[at:]
    if roll < 0.8:
        at = rng.randrange(len(text) + 1)
        return text[:at] + random_text(rng, rng.randint(0, 60)) + text[at + rng.randint(0, 30) :]
    if roll < 0.9:
        return text[: rng.randrange(len(text) + 1)]
    return random_text(rng, rng.randint(0, 3000))


@pytest.mark.parametrize("seed", range(8))
def test_counts_and_ids_equal_the_plain_ones_on_random_texts(seed):
    rng = random.Random(seed)
    compared = 0
    for _ in range(25):
        tokens, text = TextTokens(), random_text(rng, rng.randint(0, 2500))
        for _ in range(30):
            assert tokens.count(text) == old_count(text)
            if rng.random() < 0.6:  # the limit asks for ids only when it cuts
                assert tokens.token_ids(text) == whole_ids(text)
            front = text[rng.randrange(len(text) + 1) :]  # the kept text of a cut
            assert tokens.count(front) == old_count(front)
            compared += 2
            text = next_text(rng, text)
    assert compared == 1500


def dialogue_lines() -> list[list[str]]:
    """Real dialogues as a buffer renders them: the built-in suites (English and Korean) and
    the LoCoMo fixture, one "Human: ..." / "AI: ..." line per turn."""
    sources = ["builtin:classic", f"locomo:{ROOT / 'tests/fixtures/locomo/locomo_mini.json'}"]
    out = []
    for dialogue in load_dialogues(*sources):
        who = {"user": "Human", "assistant": "AI"}
        out.append([f"{who.get(t.role, t.role)}: {t.text}" for t in dialogue.turns])
    return out


class ListMemory:
    """A memory whose recall is the lines it was given, one item each (as buffer shows them)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def recall(self, query) -> Recall:
        return Recall(tuple(Item(line) for line in self.lines))


@pytest.mark.parametrize("limit", [150, 400, 900, 2500])
def test_the_context_limit_cuts_what_it_cut_before_on_real_dialogues(limit):
    dialogues = dialogue_lines()
    assert any(any("\uac00" <= ch <= "\ud7a3" for ch in "".join(d)) for d in dialogues)  # Korean
    rng, compared, cuts = random.Random(limit), 0, 0
    for lines in dialogues:
        memory = ListMemory()
        prompt = PromptMemory(memory=memory, limit=limit)
        grown = lines * 3  # long enough to need the limit and the long-text path
        for i in range(0, len(grown), 2):
            memory.lines = grown[: i + 2]
            if rng.random() < 0.2:  # a line with trailing spaces, a CRLF or a blank line
                memory.lines = [*memory.lines, rng.choice(["note  ", "a\r\nb", "", " \n"])]
            question = rng.choice(["What did I say?", "무엇을 먹었나요?"])
            got = prompt.load_memory_variables({INPUT_KEY: question})[MEMORY_KEY]
            text = "\n".join(line for line in memory.lines if line)
            want = old_limit(text, limit, question, prompt.style)
            assert (got, prompt.truncated, prompt.cut_tokens) == want
            compared += 1
            cuts += want[1]
    assert compared > 100 and cuts > 20


def test_the_context_limit_cuts_what_it_cut_before_on_random_texts():
    rng, cuts = random.Random(47), 0
    for _ in range(40):
        memory = ListMemory()
        prompt = PromptMemory(memory=memory, limit=rng.choice([300, 700, 1500]))
        text = random_text(rng, rng.randint(500, 3000))
        for _ in range(15):
            memory.lines = [text]
            got = prompt.load_memory_variables({INPUT_KEY: "Where?"})[MEMORY_KEY]
            want = old_limit(text, prompt.limit, "Where?", prompt.style)
            assert (got, prompt.truncated, prompt.cut_tokens) == want
            cuts += want[1]
            text = next_text(rng, text) or "x"
    assert cuts > 200


def test_a_growing_text_reuses_its_counted_pieces(monkeypatch):
    """What makes it fast: a text that grew is counted from the base's last piece on, and its
    ids are the base's plus the new part's (the counting of a piece is observed)."""
    import memory_lab.models.tokens as tokens_module

    counted: list[str] = []
    encoded: list[str] = []
    real_count, real_ids = tokens_module._count_lines, tokens_module.token_ids
    monkeypatch.setattr(tokens_module, "_count_lines", lambda p: counted.append(p) or real_count(p))
    monkeypatch.setattr(tokens_module, "token_ids", lambda t: encoded.append(t) or real_ids(t))
    tokens = TextTokens()
    text = "\n".join(f"Human: line {i}\nAI: reply {i}" for i in range(200))
    tokens.count(text)
    tokens.token_ids(text)
    counted.clear()
    encoded.clear()
    grown = text + "\nHuman: new line\nAI: new reply"
    assert tokens.count(grown) == old_count(grown)
    assert counted == ["AI: reply 199\n", "Human: new line\n", "AI: new reply"]
    encoded.clear()  # the pieces' counting encoded them one by one
    assert tokens.token_ids(grown) == whole_ids(grown)
    assert encoded == ["AI: reply 199\nHuman: new line\nAI: new reply"]
    counted.clear()
    cut = grown[grown.index("Human: line 150") :]
    assert tokens.count(cut) == old_count(cut) and counted == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
