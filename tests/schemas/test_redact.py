"""`schemas.redact`: the key and header values out of everything written or printed,
in every form an echo takes (any case, base64 alone or inside a longer base64 text)."""

from __future__ import annotations

import base64
import pickle
from collections.abc import Callable

import pytest

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


# --- the forms an echo takes -----------------------------------------------------------------

SECRETS = (KEY, "p@ss:w0rd/+?", "tok-12345")


def _own_chars(prefix_len: int, secret_len: int) -> tuple[int, int]:
    """Of base64 over `prefix_len` bytes, the secret's `secret_len` and more: the indices
    [start, end) of the characters that encode the secret's bits and nothing else."""
    return -(-8 * prefix_len // 6), 8 * (prefix_len + secret_len) // 6


def test_every_case_of_a_secret_is_redacted() -> None:
    redact = Redactor.of(KEY)
    mixed = "".join(c.upper() if i % 2 else c for i, c in enumerate(KEY))
    for echo in (KEY.upper(), KEY.lower(), mixed):
        assert redact(f"got {echo}.") == "got ***."


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize(
    "encode",
    [base64.b64encode, base64.urlsafe_b64encode],
    ids=["standard", "url-safe"],
)
@pytest.mark.parametrize("padded", [True, False])
def test_a_secret_encoded_alone_is_redacted_whole(
    secret: str, encode: Callable[[bytes], bytes], padded: bool
) -> None:
    encoded = encode(secret.encode()).decode()
    encoded = encoded if padded else encoded.rstrip("=")
    assert Redactor.of(secret)(f"echo: {encoded}!") == "echo: ***!"
    assert Redactor.of(None, [("X-Token", secret)])(encoded) == REDACTED


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("prefix", [b"", b"u", b"us", b"user:", b"Authorization: Bearer "])
@pytest.mark.parametrize("suffix", [b"", b"}", b"\n\x00"])
@pytest.mark.parametrize(
    "encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["standard", "url-safe"]
)
def test_a_secret_inside_a_longer_base64_text_keeps_none_of_its_own_characters(
    secret: str, prefix: bytes, suffix: bytes, encode: Callable[[bytes], bytes]
) -> None:
    encoded = encode(prefix + secret.encode() + suffix).decode()
    out = Redactor.of(secret)(f"Basic {encoded}")
    head, marker, tail = out.removeprefix("Basic ").partition(REDACTED)
    assert marker and REDACTED not in tail
    start, end = _own_chars(len(prefix), len(secret.encode()))
    # what is left of the encoded text is its start and its end, neither reaching inside
    assert encoded.startswith(head) and len(head) <= start
    assert encoded.endswith(tail) and len(encoded) - len(tail) >= end


def test_a_basic_credential_is_redacted_decoded_and_by_its_password() -> None:
    basic = base64.b64encode(b"alice:hunter2-pass").decode()
    redact = Redactor.of(None, [("Authorization", f"Basic {basic}")])
    text = f"user alice:hunter2-pass, password HUNTER2-PASS, header Basic {basic}"
    assert redact(text) == "user ***, password ***, header Basic ***"
    assert Redactor.of(None, [("Authorization", "Basic not-base64!")]).secrets == ("not-base64!",)


def test_overlapping_secrets_leave_no_fragment() -> None:
    redact = Redactor.of("abcdefgh", [("X-Other", "efghijkl")])
    assert redact("..abcdefghijkl..") == "..***.."
    assert redact("abcdefgh efghijkl") == "*** ***"


def test_a_text_cut_inside_any_form_loses_its_start() -> None:
    redact = Redactor.of(KEY)
    encoded = base64.b64encode(KEY.encode()).decode()
    assert redact(f"provided: {KEY.upper()[:12]}") == "provided: ***"
    assert redact(f"provided: {encoded[:10]}…") == "provided: ***…"
    assert redact(f"provided: {encoded[:5]}") == f"provided: {encoded[:5]}"  # too short to tell


def test_short_secrets_have_no_forms_either() -> None:
    redact = Redactor.of("abc")
    assert not redact
    assert redact(f"ABC {base64.b64encode(b'abc').decode()}") == "ABC YWJj"


def test_a_long_text_is_redacted_throughout() -> None:
    encoded = base64.b64encode(KEY.encode()).decode()
    text = ("filler " * 5000 + KEY.upper() + " " + encoded + " ") * 20
    out = Redactor.of(KEY)(text)
    assert out.count(REDACTED) == 40 and KEY.upper() not in out and encoded not in out


def test_a_redactor_survives_pickling() -> None:
    redact = Redactor.of(KEY)
    assert pickle.loads(pickle.dumps(redact))(KEY.lower()) == REDACTED
