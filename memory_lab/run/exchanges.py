"""A dialogue's exchanges: each user turn with the assistant turns after it, within a session.

A run hands a memory its dialogue exchange by exchange (``exchanges``) and tells it when a
session ends (``session_ends``); probes are placed after an exchange's turns.
"""

from __future__ import annotations

from memory_lab.dialogue.model import Dialogue, Session, Turn
from memory_lab.memories.protocol import Exchange


def exchanges(dialogue: Dialogue) -> list[Exchange]:
    """Group turns into exchanges: each user turn with the assistant turns after it.

    An exchange never spans two sessions: a session that opens with the assistant starts an
    exchange with no user turn.
    """
    out: list[Exchange] = []

    def close(session: Session, user: Turn | None, replies: list[Turn]) -> None:
        out.append(
            Exchange(
                index=len(out),
                user=user.text if user else "",
                assistant="\n".join(t.text for t in replies),
                user_turn_id=user.id if user else None,
                assistant_turn_ids=tuple(t.id for t in replies),
                session_id=session.id,
                session_date=session.date,
            )
        )

    for session in dialogue.sessions:
        user: Turn | None = None
        replies: list[Turn] = []
        for turn in session.turns:
            if turn.role == "user":
                if user is not None or replies:
                    close(session, user, replies)
                user, replies = turn, []
            else:
                replies.append(turn)
        if user is not None or replies:
            close(session, user, replies)
    return out


def session_ends(dialogue: Dialogue, exs: list[Exchange]) -> list[int | None]:
    """For each exchange, its session's index if it is that session's last exchange, else None."""
    sessions = [s.id for s in dialogue.sessions]
    return [
        sessions.index(ex.session_id)
        if i + 1 == len(exs) or exs[i + 1].session_id != ex.session_id
        else None
        for i, ex in enumerate(exs)
    ]
