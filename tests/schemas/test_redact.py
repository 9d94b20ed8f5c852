"""`schemas.redact`: the key and header values out of everything written or printed."""

from __future__ import annotations

from infertriage.schemas.redact import REDACTED, Redactor

KEY = "sk-test-0123456789abcdef"


def test_the_key_and_its_bearer_form_are_redacted() -> None:
    redact = Redactor.of(KEY)
    text = f"Incorrect API key provided: Bearer {KEY}. Key {KEY} again"
    assert redact(text) == "Incorrect API key provided: Bearer ***. Key *** again"


def test_header_values_and_their_credentials_are_redacted() -> None:
    redact = Redactor.of(
        None, [("X-Api-Token", "tok-secret-42"), ("Authorization", "Basic dXNlcjpw")]
    )
    assert redact("got tok-secret-42 and Basic dXNlcjpw") == "got *** and Basic ***"
    assert Redactor.of(None, {"X-Api-Token": "tok-secret-42"})("tok-secret-42") == REDACTED


def test_short_values_are_not_secrets() -> None:
    redact = Redactor.of("abc", [("X-Env", "on")])
    assert not redact
    assert redact("abc is on") == "abc is on"


def test_a_text_cut_inside_the_key_loses_the_start_of_it_too() -> None:
    redact = Redactor.of(KEY)
    assert redact(f"Incorrect API key provided: Bearer {KEY[:10]}") == (
        "Incorrect API key provided: Bearer ***"
    )
    assert redact(f"provided: {KEY[:12]}…") == "provided: ***…"
    assert redact(f"provided: {KEY[:5]}") == f"provided: {KEY[:5]}"  # too short to tell


def test_no_secrets_is_the_identity() -> None:
    assert Redactor()("anything at all") == "anything at all"
    assert Redactor.of(None, ())("x") == "x"


def test_a_secret_inside_another_leaves_one_marker() -> None:
    redact = Redactor.of("secret", [("X-Long", "my-secret-value")])
    assert redact("my-secret-value / secret") == "*** / ***"
