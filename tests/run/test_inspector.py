"""The memory inspector: what each memory puts into the prompt at a turn, and what it costs."""

from __future__ import annotations

import pytest

from memory_lab import inspect_memory, parse_memory_spec, replay_dialogue
from memory_lab.cli import main
from memory_lab.models.tokens import count_tokens

from ..conftest import FIXTURES

MINI = FIXTURES / "dialogues" / "mini.yaml"
LATE = "s2.t5"  # "The new office has a view of the harbour." - the cat was named in s1.t5


def test_buffer_at_a_late_turn_holds_an_early_fact(mini_dialogue, run_models):
    view = inspect_memory("buffer", mini_dialogue, LATE, models=run_models)
    assert "Mochi" in view.context
    assert view.user_input == "The new office has a view of the harbour."
    assert "harbour" not in view.context  # the exchange itself is not saved yet
    assert len(view.parts) == 6 and view.parts[0].startswith("Human: [2026-03-02] Hi!")
    assert view.memory_tokens == 0 and view.summary is None


def test_window_k1_at_the_same_turn_has_forgotten_it(mini_dialogue, run_models):
    view = inspect_memory("window:k=1", mini_dialogue, LATE, models=run_models)
    assert view.memory == "window:k=1"
    assert "Mochi" not in view.context
    assert view.parts == ("Human: [2026-03-09] Big news: I moved to Busan last weekend.\n"
                          "AI: Congratulations on the move!",)  # fmt: skip


def test_query_is_asked_after_the_turn_is_saved(mini_dialogue, run_models):
    view = inspect_memory(
        "window:k=1", mini_dialogue, LATE, models=run_models, query="Where is my office?"
    )
    assert view.user_input == "Where is my office?" and "harbour" in view.context
    assert view.prompt.rstrip().endswith("Human: Where is my office?\nAI:")


def test_summary_shows_its_summary_and_maintenance_cost(mini_dialogue, run_models):
    view = inspect_memory("summary", mini_dialogue, LATE, models=run_models)
    assert view.summary and view.context == view.summary
    assert view.parts == (view.summary,)
    assert view.memory_tokens > 0
    assert "\nsummary:\n" in view.to_text()


def test_vector_shows_at_most_k_snippets(mini_dialogue, run_models):
    view = inspect_memory(
        "vector:k=2", mini_dialogue, LATE, models=run_models, query="What is my cat called?"
    )
    assert 1 <= len(view.parts) <= 2
    assert all(p.startswith("input: ") for p in view.parts)
    assert any("Mochi" in p for p in view.parts)


def test_token_counts_match_the_tokenizer_and_the_runner(mini_dialogue, run_models):
    view = inspect_memory("summary", mini_dialogue, LATE, models=run_models)
    assert view.context_tokens == count_tokens(view.context) > 0
    assert view.prompt_tokens == count_tokens(view.prompt) > view.context_tokens
    records: list[dict] = []
    replay_dialogue(parse_memory_spec("summary"), mini_dialogue, run_models, records.append)
    turns = [r for r in records if r["type"] == "turn"]
    at = next(r for r in turns if r["turn_id"] == LATE)
    assert at["prompt"] == view.prompt and at["context_tokens"] == view.context_tokens
    assert view.memory_tokens == sum(r["memory_tokens"] for r in turns[: at["exchange"]])


def test_unknown_turn_id_names_the_dialogue_and_valid_ids(mini_dialogue, run_models):
    with pytest.raises(ValueError) as err:
        inspect_memory("buffer", mini_dialogue, "s7.t1", models=run_models)
    message = str(err.value)
    assert "mini-profile" in message and "'s7.t1'" in message
    assert "s1.t1" in message and "fastapi" in message


def test_dialogue_by_file_or_builtin_id(run_models):
    view = inspect_memory("window:k=1", str(MINI), "cat", models=run_models)
    assert view.dialogue == "mini-profile" and "FastAPI" in view.context
    view = inspect_memory("window:k=1", "trip-portugal-changes", "s1.t4", models=run_models)
    assert view.dialogue == "trip-portugal-changes" and view.exchange == 1
    with pytest.raises(ValueError, match="trip-portugal-changes"):
        inspect_memory("buffer", "no-such-dialogue", "s1.t1", models=run_models)


def test_html_view_escapes_text(mini_dialogue, run_models):
    view = inspect_memory("buffer", mini_dialogue, LATE, models=run_models, query="<b>cat</b>?")
    rendered = view._repr_html_()
    assert "&lt;b&gt;cat&lt;/b&gt;?" in rendered and "<b>cat</b>" not in rendered
    assert "I&#x27;m Jisoo" in rendered


def test_cli_prints_the_view(capsys):
    code = main(["inspect", "window:k=1", str(MINI), "--at", LATE, "--prompt"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err.startswith(f"replaying {MINI} through window:k=1 up to {LATE}")  # not silent
    assert "memory window:k=1 | dialogue mini-profile" in out
    assert "[1] Human: [2026-03-09] Big news: I moved to Busan last weekend." in out
    assert "Current conversation:" in out  # --prompt prints the full prompt
    assert main(["inspect", "buffer", str(MINI), "--at", "nope"]) == 2
    assert "has no turn 'nope'" in capsys.readouterr().err


def test_the_prompt_is_in_the_runs_answer_style(mini_dialogue):
    """``--answer-style short`` runs record the short prompt; inspect shows that one too."""
    from memory_lab.log.config import RunConfig
    from memory_lab.models.prompt import render_prompt
    from memory_lab.run.context import RunModels

    models = RunModels.create(RunConfig(answer_style="short"), record_prompts=False)
    view = inspect_memory(
        "buffer", mini_dialogue, mini_dialogue.sessions[1].turns[0].id, models=models
    )
    assert view.prompt == render_prompt(view.context, view.user_input, "short")
    assert view.prompt != render_prompt(view.context, view.user_input)
