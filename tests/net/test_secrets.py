"""The seam's secrets: a URL's user-info, headers that cannot be sent, the origin test."""

from __future__ import annotations

import base64

import pytest

from infertriage.net import (
    api_url,
    auth_headers,
    basic_authorization,
    check_header,
    normalize_base_url,
    redactor_of,
    root_url,
    split_userinfo,
    strip_userinfo,
)
from infertriage.net.urls import same_origin
from infertriage.schemas import UserError


def test_user_info_comes_off_every_normalised_url() -> None:
    typed = "http://alice:s3cret%40pw@h:8000/v1/"
    assert split_userinfo(typed) == ("http://h:8000/v1/", "alice:s3cret@pw")
    assert split_userinfo("http://h:8000/v1") == ("http://h:8000/v1", None)
    assert strip_userinfo("https://tok@gw.example/llm") == "https://gw.example/llm"
    assert root_url(typed) == "http://h:8000"
    assert api_url("alice:pw@h:8000") == "http://h:8000/v1"
    assert normalize_base_url(typed) == "http://h:8000/v1"


def test_a_refused_url_is_quoted_without_its_password() -> None:
    with pytest.raises(UserError) as refused:
        normalize_base_url("ftp://alice:s3cret@h")
    assert "s3cret" not in str(refused.value)


def test_user_info_becomes_basic_auth_and_a_secret() -> None:
    value = basic_authorization("alice:s3cret@pw")
    assert value == "Basic " + base64.b64encode(b"alice:s3cret@pw").decode()
    assert basic_authorization("alice") == "Basic " + base64.b64encode(b"alice:").decode()
    redact = redactor_of(None, {"Authorization": value})
    assert redact("pw s3cret@pw, pair alice:s3cret@pw, sent " + value) == (
        "pw ***, pair ***, sent Basic ***"
    )


@pytest.mark.parametrize("bad", ["sk-a\r\nX-Evil: 1", "sk-a\nb", "sk-\x00", "sk-\x1b[2J", "a\x7f"])
def test_a_control_character_in_a_key_or_header_is_one_sentence(bad: str) -> None:
    for call in (
        lambda: auth_headers(bad),
        lambda: auth_headers(None, {"X-Api-Key": bad}),
        lambda: check_header("--header", "X-Api-Key", bad),
    ):
        with pytest.raises(UserError, match="control character") as refused:
            call()
        assert bad not in str(refused.value) and "\n" not in str(refused.value)
    assert auth_headers("sk-fine", {"X-A": "b c"}) == {
        "X-A": "b c",
        "Authorization": "Bearer sk-fine",
    }


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("http://h:8000/v1/models", "http://h:8000/elsewhere", True),
        ("http://h/v1", "http://H:80/v1", True),
        ("https://h/v1", "https://h:443/x", True),
        ("http://h:8000/v1", "http://h:8001/v1", False),
        ("http://h:8000/v1", "https://h:8000/v1", False),
        ("http://h:8000/v1", "http://evil:8000/v1", False),
        ("http://h:8000/v1", "/relative", False),
        ("http://h:8000/v1", "http://h:bad/", False),
    ],
)
def test_an_origin_is_scheme_host_and_port(first: str, second: str, same: bool) -> None:
    assert same_origin(first, second) is same
