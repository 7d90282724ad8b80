"""The one redaction: credentials in URLs, DSNs, query strings and parameters become ``***``."""

from __future__ import annotations

import pytest

from memory_lab.text.redact import (
    MARK,
    is_secret_name,
    redact,
    redact_value,
    remember,
    remember_resources,
    secrets_in,
)

S = "PLANTED-s3cr3t-XYZ"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"postgresql://u:{S}@db.example:5432/app", "postgresql://***@db.example:5432/app"),
        (f"postgresql://:{S}@db.example/app", "postgresql://***@db.example/app"),
        ("postgresql://u:p%40ss%2Fw0rd@db/app", "postgresql://***@db/app"),
        ("postgresql://u:p@ss@db/app", "postgresql://***@db/app"),  # a raw @: the last one ends
        (f"http://user:{S}@127.0.0.1:9/v1/chat", "http://***@127.0.0.1:9/v1/chat"),
        (f"https://{S}@api.example/v1", "https://***@api.example/v1"),  # a token as the user
        ("postgresql://alice@db/app", "postgresql://***@db/app"),  # a user alone too
        (f"host=h port=5 password={S} dbname=x", "host=h port=5 password=*** dbname=x"),
        (f"host=h password = {S} dbname=x", "host=h password = *** dbname=x"),
        (f"host=h password='it\\'s {S}' dbname=x", "host=h password=*** dbname=x"),
        (f"host=h password='{S} and no end", "host=h password=***"),  # libpq quotes the rest
        (f"postgres=password={S} host=h", "postgres=password=*** host=h"),  # --resource NAME=
        (
            f"postgresql://h/db?sslmode=require&password={S}&sslpassword={S}&user=u",
            "postgresql://h/db?sslmode=require&password=***&sslpassword=***&user=u",
        ),
        (
            f"https://h/v1?api_key={S}&apikey={S}&token={S}&access_token={S}&key={S}",
            "https://h/v1?api_key=***&apikey=***&token=***&access_token=***&key=***",
        ),
        (f"PGPASSWORD={S} OPENAI_API_KEY={S}", "PGPASSWORD=*** OPENAI_API_KEY=***"),
        (f"{{'api_key': '{S}', 'max_tokens': 5}}", "{'api_key': '***', 'max_tokens': 5}"),
        (f'{{"client_secret": "{S}"}}', '{"client_secret": "***"}'),
        (f"Authorization: Bearer {S}", "Authorization: Bearer ***"),
    ],
)
def test_credentials_are_masked_by_their_form(text, expected):
    assert redact(text, known=False) == expected
    assert redact(expected, known=False) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "max(items, key=len) with max_tokens=100 and token_limit=3",
        "cannot reach PostgreSQL at 127.0.0.1:5432/app (resource 'postgres')",
        "http://127.0.0.1:8000/v1",
        "Basic authentication failed for user@example.com",
        '{"model_name": "gpt-4o-mini", "temperature": 0.0, "tokenizer": "o200k_base"}',
    ],
)
def test_text_without_credentials_is_left_as_it_is(text):
    assert redact(text, known=False) == text


def test_known_secret_values_are_masked_wherever_they_appear(monkeypatch):
    token = "tok-" + S + "-opaque"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + S)
    remember_resources(
        {"db": f"postgresql://u:p%40{S}@h/db", "kw": f"host=h password='q {S}!'", "t": token},
        base_url=f"http://bob:{S}-url@h/v1",
    )
    quoted = f"login failed: p@{S} / q {S}! / {token} / key sk-{S} / {S}-url"
    out = redact(quoted)
    assert S not in out and out.count(MARK) == 5
    remember("abc")  # too short to mask by value: only its form would show it
    assert redact("abc") == "abc"


def test_the_secret_parts_of_a_value_are_passwords_never_hosts_or_users():
    assert secrets_in(f"postgresql://alice:{S}@h/db") == {S}
    assert secrets_in("postgresql://u:p%40ssw0rd@h/db") == {"p%40ssw0rd", "p@ssw0rd"}
    assert secrets_in(f"host=h user=alice password='it\\'s {S}'") == {
        f"'it\\'s {S}'",
        f"it's {S}",
    }
    assert secrets_in("postgresql://postgres@127.0.0.1/postgres") == set()
    assert secrets_in(None) == set()


def test_secret_named_parameters_are_masked_and_others_kept():
    params = {
        "model_name": "gpt-4o-mini",
        "max_tokens": 256,
        "openai_api_key": "sk-" + S,
        "anthropic_api_key": {"type": "secret", "id": ["ANTHROPIC_API_KEY"]},
        "access_token": S,
        "sslpassword": S,
        "base_url": f"http://u:{S}@h/v1",
        "stop": ("a", "b"),
        "unset_key": None,
        "nested": [{"secret": S}],
    }
    out = redact_value(params, known=False)
    assert out == {
        "model_name": "gpt-4o-mini",
        "max_tokens": 256,
        "openai_api_key": MARK,
        "anthropic_api_key": MARK,
        "access_token": MARK,
        "sslpassword": MARK,
        "base_url": "http://***@h/v1",
        "stop": ("a", "b"),
        "unset_key": None,
        "nested": [{"secret": MARK}],
    }
    assert params["access_token"] == S  # the input is left as it was


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("openai_api_key", True),
        ("x-api-key", True),
        ("apikey", True),
        ("sslpassword", True),
        ("PGPASSWORD", True),
        ("access_token", True),
        ("client_secret", True),
        ("key", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("key_encoder", False),
        ("monkey", False),
        ("rrf_k", False),
        ("PWD", False),  # the working directory
    ],
)
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_paths_and_words_are_never_taken_for_secret_values(monkeypatch, tmp_path):
    """Masking them everywhere would mask the run's file names too (and break --resume)."""
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("SOME_TOOL_KEY", str(tmp_path))
    monkeypatch.setenv("SHORT_TOKEN", "abc")
    remember_resources({"data": str(tmp_path), "mode": "fast", "n": "12345678 apart"})
    text = f"{tmp_path}/dialogues/a.yaml fast 12345678 apart abc"
    assert redact(text) == text
