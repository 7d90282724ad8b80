"""``profile``: a user profile the memory model keeps up to date, plus the last exchanges.

The architecture guide's ``UserProfile`` / ``UserPreferences`` models and ``ProfileUpdater``.
After each exchange the memory model is asked which profile fields the exchange states or
changes, as JSON for the flat ``ProfileUpdate`` schema (the extraction prompt of
``models.tasks``, listing the current profile so a changed field is given again under its
name). The model answers through ``with_structured_output(ProfileUpdate)``, whichever provider
serves it (offline, deterministically: a field takes the user sentence sharing most words with
its name and description, and ``important_facts`` every informative user sentence); a model
without structured output gets the same prompt and its JSON reply is parsed.
Scalar fields are overwritten (a new job or city replaces the old one), list fields are appended
without duplicates, and ``important_facts`` are keyed facts: one under a key already stored
replaces it (the prompt lists the stored keys), a fact another field already shows is left out.
Lists and facts keep their newest ``list_limit`` items, so the profile, and the prompts that carry
it, stay bounded. The context is the rendered profile, then the last ``k`` exchanges. Each
field and fact remembers the user turn its value came from, which the recall reports.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError

from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.text.normalize import normalize

PROFILE_HEADER = "User profile:"
RECENT_HEADER = "Recent conversation:"


class UserPreferences(BaseModel):
    """How the user likes things."""

    communication_style: str | None = Field(
        None, description="preferred style of answers: tone, length, format"
    )
    likes: list[str] = Field(
        default_factory=list, description="likes of the user (I like, love, enjoy or prefer ...)"
    )
    dislikes: list[str] = Field(
        default_factory=list, description="dislikes of the user (I hate, avoid, am allergic to ...)"
    )


class ProfileFact(BaseModel):
    """A lasting fact about the user under a short stable key."""

    key: str = Field(description="a short stable name for the fact; the same key when it changes")
    value: str = Field(description="what is true now")


class UserProfile(BaseModel):
    """What the memory knows about the user: current values only."""

    name: str | None = Field(None, description="name of the user (my name is ..., call me ...)")
    occupation: str | None = Field(
        None, description="job of the user: occupation, profession, employer (I work ...)"
    )
    location: str | None = Field(
        None, description="city or town the user lives in (I live in ..., I moved to ...)"
    )
    family: list[str] = Field(
        default_factory=list,
        description="family members, partner, children, friends and pets (my sister, my wife, "
        "my son, my friend, my dog ...)",
    )
    interests: list[str] = Field(
        default_factory=list, description="hobbies and interests (I play ..., my hobby is ...)"
    )
    goals: list[str] = Field(
        default_factory=list,
        description="plans and upcoming events (a trip, exam, deadline, appointment, flight or "
        "meeting)",
    )
    important_facts: list[ProfileFact] = Field(
        default_factory=list,
        description="other lasting facts about the user (numbers, dates, bookings, names), one "
        "per key; a changed fact keeps its key",
    )
    preferences: UserPreferences = Field(default_factory=UserPreferences)


def _described(model: type[BaseModel], name: str, default: Any) -> Any:
    return Field(default, description=model.model_fields[name].description)


class ProfileUpdate(BaseModel):
    """Only the profile fields this conversation states or changes; leave the others null/empty.

    A changed value (a new job, a move to another city) is given in full under its field.
    """

    name: str | None = _described(UserProfile, "name", None)
    occupation: str | None = _described(UserProfile, "occupation", None)
    location: str | None = _described(UserProfile, "location", None)
    communication_style: str | None = _described(UserPreferences, "communication_style", None)
    family: list[str] = _described(UserProfile, "family", [])
    interests: list[str] = _described(UserProfile, "interests", [])
    goals: list[str] = _described(UserProfile, "goals", [])
    likes: list[str] = _described(UserPreferences, "likes", [])
    dislikes: list[str] = _described(UserPreferences, "dislikes", [])
    important_facts: list[ProfileFact] = _described(UserProfile, "important_facts", [])


PREFERENCE_FIELDS = tuple(UserPreferences.model_fields)
SCALAR_FIELDS = ("name", "occupation", "location", "communication_style")
LIST_FIELDS = ("family", "interests", "goals", "likes", "dislikes")
FACTS = "important_facts"
LABELS = {name: name.replace("_", " ").capitalize() for name in ProfileUpdate.model_fields}


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema with its ``$defs`` references written in place (one self-contained tree)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return walk(schema)


UPDATE_SCHEMA = inline_refs(ProfileUpdate.model_json_schema())  # what the extraction prompt shows


def _same(a: str, b: str) -> bool:
    return normalize(a) == normalize(b)


class ProfileUpdater:
    """Applies a ``ProfileUpdate`` to a ``UserProfile``: scalars overwritten, lists merged.

    ``sources`` keeps, per (field, value), the turn ids the value came from.
    """

    def __init__(self, profile: UserProfile | None = None, list_limit: int = 10):
        self.profile = profile or UserProfile()
        self.list_limit = list_limit
        self.sources: dict[tuple[str, str], tuple[str, ...]] = {}

    def _owner(self, name: str) -> BaseModel:
        return self.profile.preferences if name in PREFERENCE_FIELDS else self.profile

    def get(self, name: str) -> Any:
        return getattr(self._owner(name), name)

    def apply(self, update: ProfileUpdate, turn_ids: tuple[str, ...] = ()) -> list[str]:
        """Merge ``update`` into the profile; the names of the fields that changed."""
        changed = []
        for name in SCALAR_FIELDS:
            value = getattr(update, name)
            old = self.get(name)
            if value and value.strip() and not (old and _same(old, value)):
                value = value.strip()
                setattr(self._owner(name), name, value)
                if old:
                    self.sources.pop((name, old), None)
                self.sources[(name, value)] = turn_ids
                changed.append(name)
        for name in LIST_FIELDS:
            items: list[str] = self.get(name)
            new = [v.strip() for v in getattr(update, name) if v and v.strip()]
            added = False
            for value in new:
                if any(_same(value, old) for old in items):
                    continue
                items.append(value)
                self.sources[(name, value)] = turn_ids
                added = True
            while len(items) > self.list_limit:  # the newest list_limit items stay
                self.sources.pop((name, items.pop(0)), None)
            if added:
                changed.append(name)
        if self.merge_facts(update.important_facts, turn_ids):
            changed.append(FACTS)
        return changed

    def merge_facts(self, facts: list[ProfileFact], turn_ids: tuple[str, ...]) -> bool:
        """A fact replaces the one under its key, or is appended; the newest ``list_limit`` stay.

        A fact whose value another field already shows is left out (no line said twice).
        """
        stored: list[ProfileFact] = self.profile.important_facts
        shown = [v for name, v in self.known() if name in ProfileUpdate.model_fields]
        merged = False
        for fact in facts:
            key, value = fact.key.strip(), fact.value.strip()
            if not key or not value or any(_same(value, v) for v in shown):
                continue
            old = next((f for f in stored if f.key == key), None)
            if old is not None and _same(old.value, value):
                continue
            if old is not None:
                stored.remove(old)
            stored.append(ProfileFact(key=key, value=value))
            self.sources[(FACTS, key)] = turn_ids
            merged = True
        while len(stored) > self.list_limit:
            self.sources.pop((FACTS, stored.pop(0).key), None)
        return merged

    def known(self) -> list[tuple[str, str]]:
        """(field, value) pairs of the filled fields, then (key, value) of each stored fact."""
        out = []
        for name in ProfileUpdate.model_fields:
            value = self.get(name) if name != FACTS else None
            if value:
                out.append((name, "; ".join(value) if isinstance(value, list) else value))
        return out + [(f.key, f.value) for f in self.profile.important_facts]

    def items(self) -> list[Item]:
        """One item per filled field (``- Location: ...``) and per fact, with their source turns."""
        out = []
        for name in ProfileUpdate.model_fields:
            if name == FACTS:
                continue
            value = self.get(name)
            if not value:
                continue
            values = value if isinstance(value, list) else [value]
            ids = tuple(dict.fromkeys(t for v in values for t in self.sources.get((name, v), ())))
            out.append(Item(f"- {LABELS[name]}: {'; '.join(values)}", ids, "profile"))
        if self.profile.important_facts:
            out.append(Item(f"- {LABELS[FACTS]}:", (), "other"))
        for fact in self.profile.important_facts:
            ids = self.sources.get((FACTS, fact.key), ())
            out.append(Item(f"  - {fact.value}", ids, "profile"))
        return out


class ProfileMemory:
    """A ``UserProfile`` the memory model updates after every exchange, plus the last ``k``."""

    def __init__(self, model: Any, k: int = 3, list_limit: int = 10, timestamps: bool = True):
        self.model = model
        try:
            self.structured = model.with_structured_output(ProfileUpdate)
        except NotImplementedError:  # a model without structured output: the JSON prompt
            self.structured = None
        self.k = k
        self.updater = ProfileUpdater(list_limit=list_limit)
        self.timestamps = timestamps
        self.recent: list[Exchange] = []
        self.unparsed_replies = 0

    @property
    def profile(self) -> UserProfile:
        return self.updater.profile

    def observe(self, exchange: Exchange) -> None:
        self.recent = [*self.recent, exchange][-self.k :]
        if exchange.user:
            update = self.extract(exchange)
            if update is not None:
                turn = (exchange.user_turn_id,) if exchange.user_turn_id else ()
                self.updater.apply(update, turn)

    def extract(self, ex: Exchange) -> ProfileUpdate | None:
        """The memory model's ``ProfileUpdate`` for one exchange (None when unparsable)."""
        from memory_lab.models.tasks import extract_prompt, parse_json_reply

        transcript = (
            f"Human: {ex.user}\nAI: {ex.assistant}" if ex.assistant else f"Human: {ex.user}"
        )
        prompt = extract_prompt(transcript, UPDATE_SCHEMA, known=self.updater.known())
        try:
            if self.structured is not None:
                reply = self.structured.invoke(prompt)
                return reply if isinstance(reply, ProfileUpdate) else None
            data = parse_json_reply(str(self.model.invoke(prompt).content))
            return ProfileUpdate.model_validate(data)
        except (ValueError, ValidationError):
            self.unparsed_replies += 1
            return None

    def end_session(self, session: SessionInfo) -> None:
        """A profile spans sessions; the recent exchanges run on across them."""

    def recall(self, query: Query) -> Recall:
        fields = self.updater.items()
        items = [Item(PROFILE_HEADER, (), "other"), *fields] if fields else []
        if self.recent:
            items.append(Item(RECENT_HEADER, (), "other"))
            for ex in self.recent:
                lines = []
                if ex.user:
                    lines.append(f"Human: {ex.dated_user() if self.timestamps else ex.user}")
                if ex.assistant:
                    lines.append(f"AI: {ex.assistant}")
                items.append(Item("\n".join(lines), ex.turn_ids, "verbatim"))
        return Recall(tuple(items))

    def snapshot(self) -> dict[str, Any]:
        return {
            "profile": self.profile.model_dump(),
            "recent": [list(ex.turn_ids) for ex in self.recent],
            "unparsed_replies": self.unparsed_replies,
        }

    def held_texts(self) -> list[str]:
        """The profile's filled fields and facts, then the recent exchanges."""
        recent = [text for ex in self.recent for text in (ex.user, ex.assistant)]
        return [value for _, value in self.updater.known()] + recent

    def close(self) -> None:
        """Nothing to release."""


@register_memory(
    "profile",
    "A user profile (name, job, city, people, interests, plans, facts, likes) the memory "
    "model updates after every exchange, plus the last k exchanges (the guide's "
    "UserProfile and ProfileUpdater).",
    {
        "k": ParamDoc("recent exchanges shown beside the profile", min=1),
        "list_limit": ParamDoc("items a list field keeps (the newest)", min=1),
    },
    roles=("memory",),
)
def profile(res: MemoryResources, k: int = 3, list_limit: int = 10) -> ProfileMemory:
    return ProfileMemory(res.memory_llm, k=k, list_limit=list_limit, timestamps=res.timestamps)
