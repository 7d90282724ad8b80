"""A small BEAM-shaped copy written by the tests (no BEAM text): chats/<scale>/<n>/ folders with
chat.json batches and probing_questions/probing_questions.json, and a 10M plan folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def batches(first_id: int = 0, start_day: int = 3) -> list[dict[str, Any]]:
    """Two batches of two exchanges each; the first user message of a batch has its anchor."""
    facts = [
        (
            "I am planning the garden shed build; the first coat of paint dries by March 29.",
            "Noted, paint drying ends March 29.",
        ),
        (
            "The shed roof uses cedar shingles, bought at the corner yard.",
            "Cedar is a fine choice.",
        ),
        ("Update: the shed budget is now 900 dollars instead of 700 dollars.", "Budget updated."),
        ("Please always answer me in bullet points from now on.", "Understood, bullet points."),
    ]
    out, mid = [], first_id
    for b in range(2):
        turns = []
        for k in range(2):
            user, assistant = facts[2 * b + k]
            msg = {
                "role": "user",
                "id": mid,
                "index": f"{b + 1},{k + 1}",
                "question_type": "main_question",
                "content": f"{user} ->-> {b + 1},{k + 1}",
            }
            if k == 0:
                msg["time_anchor"] = f"April-{start_day + 10 * b:02d}-2024"
            turns.append([msg, {"role": "assistant", "id": mid + 1, "content": assistant}])
            mid += 2
        out.append({"batch_number": b + 1, "turns": turns, "time_anchor": None})
    return out


def questions(offset: int = 0) -> dict[str, list[dict[str, Any]]]:
    """One probing question per ability, in BEAM's field names, evidence in all its forms."""
    o = offset
    return {
        "abstention": [
            {
                "question": "What colour is the shed door?",
                "difficulty": "easy",
                "abstention_type": "missing_detail",
                "ideal_response": "Based on the chat, there is no information about it.",
                "rubric": ["Based on the chat, there is no information about it"],
            }
        ],
        "contradiction_resolution": [
            {
                "question": "Did I buy shingles?",
                "difficulty": "clear",
                "ideal_answer": "You said both; which is it?",
                "source_chat_ids": {"first_statement": [2 + o], "second_statement": [2 + o]},
                "rubric": [
                    "LLM response should state: there is contradictory information",
                    "LLM response should mention: which statement is correct?",
                ],
            }
        ],
        "event_ordering": [
            {
                "question": "In what order did I bring up the shed topics?",
                "answer": "Paint, then roof, then budget.",
                "difficulty": "medium",
                "ordering_type": "mention_sequence",
                "source_chat_ids": [[0 + o], [2 + o], [4 + o]],
                "rubric": ["Paint drying", "Roof shingles", "Budget update"],
            }
        ],
        "information_extraction": [
            {
                "question": "When does the first coat of paint dry?",
                "answer": "It dries by March 29.",
                "difficulty": "easy",
                "question_type": "context_date/time",
                "source_chat_ids": [0 + o],
                "rubric": ["LLM response should state: March 29"],
            }
        ],
        "instruction_following": [
            {
                "question": "What should I do next?",
                "difficulty": "medium",
                "instruction_type": "format_instruction",
                "expected_compliance": "Response should use bullet points.",
                "source_chat_ids": [6 + o],
                "rubric": ["LLM response should contain: bullet points"],
            }
        ],
        "knowledge_update": [
            {
                "question": "What is the shed budget?",
                "answer": "900 dollars",
                "difficulty": "easy",
                "update_type": "budget_change",
                "source_chat_ids": {"original_info": [4 + o], "updated_info": [4 + o]},
                "rubric": ["LLM response should state: 900 dollars"],
            }
        ],
        "multi_session_reasoning": [
            {
                "question": "Which two shed parts did I mention?",
                "answer": "The paint and the roof.",
                "difficulty": "easy",
                "reasoning_type": "simple",
                "source_chat_ids": [0 + o, 2 + o],
                "rubric": ["LLM response should state: paint", "LLM response should state: roof"],
            }
        ],
        "preference_following": [
            {
                "question": "Suggest a roof material.",
                "difficulty": "medium",
                "preference_type": "material",
                "expected_compliance": "Response should suggest cedar.",
                "source_chat_ids": [2 + o],
                "rubric": ["LLM response should contain: suggests cedar"],
            }
        ],
        "summarization": [
            {
                "question": "Summarise my shed project.",
                "difficulty": "hard",
                "summarization_type": "progressive",
                "ideal_summary": "Paint, cedar roof, a 900 dollar budget.",
                "rubric": ["LLM response should contain: the cedar roof"],
            }
        ],
        "temporal_reasoning": [
            {
                "question": "How many days between the two anchors?",
                "answer": "10 days",
                "difficulty": "easy",
                "temporal_type": "duration_calculation",
                "source_chat_ids": {"first_event": [0 + o], "second_event": [4 + o]},
                "rubric": ["LLM response should state: 10 days"],
            }
        ],
    }


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), "utf-8")
    return path


def conversation(folder: Path, chat: Any = None, qs: Any = None) -> Path:
    write_json(folder / "chat.json", batches() if chat is None else chat)
    write_json(folder / "probing_questions" / "probing_questions.json", qs or questions())
    return folder


def ten_m(folder: Path, plans: int = 2) -> Path:
    """A 10M-style conversation: plan-0 ... plan-(plans-1), each numbering its ids from 0; the
    questions name plan 1's messages by the shifted ids (plan 0 ends at id 7)."""
    for n in range(plans):
        write_json(folder / f"plan-{n}" / "chat.json", batches(start_day=3 + n))
    write_json(folder / "probing_questions" / "probing_questions.json", questions(offset=8))
    return folder


def chats(root: Path) -> Path:
    """chats/ with 100K/1, 100K/2, 100K/3 and 10M/1."""
    for n in (1, 2, 3):
        conversation(root / "100K" / str(n))
    ten_m(root / "10M" / "1")
    return root
