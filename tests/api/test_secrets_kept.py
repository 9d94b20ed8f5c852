"""Nothing leaks: no secret, in any form, reaches a file, the terminal or another server.

Against real loopback servers (tests/secretserver.py): one that echoes the
key and headers it was sent into `X-Request-Id`, its stream's first event's
`id` and its error texts, upper-case, lower-case and base64 (alone, URL-safe,
inside a longer base64 text); one that 307-redirects everything to another
port. After `bench` and `validate`, every file of the run directory (and the
Markdown) and what was printed are searched for every form of every secret.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from infertriage.cli import main

from ..secretserver import serve_echoing, serve_recording, serve_redirecting

KEY = "sk-kept-0123456789abcdefSECRET"
TOKEN = "hdr-kept-98765SECRET"
USER, PASSWORD = "alice", "pw-kept-4242SECRET"
SMALL = ["--workload", "synthetic:input=8,output=4", "--concurrency", "2"]
_PREFIXES = (b"user:", b"Authorization: Bearer ", b"{", b"Basic ")


@pytest.fixture(autouse=True)
def _wide_plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # a secret wrapped over two lines of a table would hide from a search
    monkeypatch.setenv("COLUMNS", "1000")


def _inner(prefix: bytes, secret: bytes) -> str:
    """Of `prefix + secret + more` in base64, the characters that encode the secret alone."""
    encoded = base64.b64encode(prefix + secret + b"\x00\x00\x00").decode()
    return encoded[-(-8 * len(prefix) // 6) : 8 * (len(prefix) + len(secret)) // 6]


def forms(secret: str) -> dict[str, str]:
    """Every form of `secret` a leak may take, by name; a text is searched in lower case
    for the first (any case), as it is for the rest."""
    raw = secret.encode()
    found = {
        "as is, any case": secret.lower(),
        "base64": base64.b64encode(raw).decode().rstrip("="),
        "base64 url-safe": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }
    for prefix in _PREFIXES:
        found[f"base64 after {prefix!r}"] = _inner(prefix, raw)
        found[f"url-safe base64 after {prefix!r}"] = _inner(prefix, raw).translate(
            str.maketrans("+/", "-_")
        )
    return found


def _texts(data: str) -> list[str]:
    # as written; and without what wraps or escapes it (Markdown's `\_`, a table's wrap)
    return [data, "".join(data.split()).replace("\\", "")]


def leaks(root: Path, secrets: list[str], *outputs: str) -> list[str]:
    """Where any form of any secret appears: a file under `root`, or one of `outputs`."""
    places = [(str(p), p.read_text(errors="replace")) for p in root.rglob("*") if p.is_file()]
    places += [(f"output {i}", text) for i, text in enumerate(outputs)]
    found = []
    for where, data in places:
        for text in _texts(data):
            for secret in secrets:
                for name, form in forms(secret).items():
                    hit = form in text.lower() if name == "as is, any case" else form in text
                    if hit:
                        found.append(f"{where}: {secret} {name}")
    return sorted(set(found))


def _server_ids(run: Path) -> list[str]:
    lines = (run / "requests.jsonl").read_text().splitlines()
    return [json.loads(line).get("server_request_id", "") for line in lines]


def test_bench_against_an_echoing_server_stores_and_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_echoing() as (url, seen):
        secrets = ["--api-key", KEY, "--header", f"X-Secret-Token: {TOKEN}"]
        code = main(["bench", "--url", url, "--num-requests", "24", *SMALL, *secrets,
                     "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(seen.headers_of("/chat/completions")) >= 24  # every echo was sent
    ids = _server_ids(tmp_path / "run")
    assert any(ids)  # the server's ids were kept, redacted
    assert leaks(tmp_path, [KEY, TOKEN], captured.out, captured.err) == []


@pytest.mark.slow
def test_validate_against_an_echoing_server_stores_and_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    markdown = tmp_path / "validate.md"
    with serve_echoing() as (url, _):
        code = main(["validate", "--url", url, "--num-requests", "24", *SMALL,
                     "--out", str(tmp_path / "run"), "--markdown", str(markdown)])  # fmt: skip
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert "functional.request_id" in markdown.read_text()  # the check that quotes an id
    assert leaks(tmp_path, [KEY], captured.out, captured.err) == []


def test_a_password_in_the_url_is_sent_as_basic_auth_and_stored_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    userinfo = f"{USER}:{PASSWORD}"
    with serve_echoing(user_info=userinfo) as (root, seen):
        url = root.replace("http://", f"http://{USER}:{PASSWORD}@") + "/v1"
        code = main(["bench", "--url", url, "--num-requests", "8", *SMALL,
                     "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err  # the server took the credentials: they were sent
    basic = "Basic " + base64.b64encode(userinfo.encode()).decode()
    assert {h.get("Authorization") for h in seen.headers_of("/chat/completions")} == {basic}
    stored = json.loads((tmp_path / "run" / "run.json").read_text())
    assert stored["spec"]["url"] == root + "/v1"
    assert leaks(tmp_path, [PASSWORD, userinfo], captured.out, captured.err) == []


@pytest.mark.slow
def test_validate_with_a_password_in_the_url_stores_and_prints_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    userinfo = f"{USER}:{PASSWORD}"
    with serve_echoing(user_info=userinfo) as (root, _):
        url = root.replace("http://", f"http://{USER}:{PASSWORD}@")
        code = main(["validate", "--url", url, "--num-requests", "8", *SMALL,
                     "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    stored = json.loads((tmp_path / "run" / "run.json").read_text())
    assert stored["spec"]["url"] == root and stored["config"]["target"] == root
    assert leaks(tmp_path, [PASSWORD, userinfo], captured.out, captured.err) == []


def test_a_password_in_the_url_and_a_key_are_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1"
    code = main(["bench", "--url", url, "--api-key", KEY, "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 2 and "give one of them" in captured.err
    assert "Traceback" not in captured.err and not (tmp_path / "run").exists()
    assert leaks(tmp_path, [PASSWORD, KEY], captured.out, captured.err) == []


def test_a_redirected_load_sends_no_secret_to_the_other_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    headers = ["--header", "X-Api-Key: xak-kept-SECRET", "--header", "api-key: azure-kept-SECRET"]
    with serve_recording() as (elsewhere, seen), serve_redirecting(elsewhere) as (front, _):
        code = main(["bench", "--url", front, "--num-requests", "4", *SMALL, "--api-key", KEY,
                     *headers, "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert seen.headers_of("/v1/models") and len(seen.headers_of("/chat/completions")) >= 4
    sent = [(path, name, value) for path, got in seen.seen for name, value in got.items()]
    leaked = [
        (path, name)
        for path, name, value in sent
        if name.lower() in {"authorization", "x-api-key", "api-key"} or "SECRET" in value
    ]
    assert leaked == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--api-key", "sk-kept\r\nX-Injected: 1"],
        ["--header", "X-Api-Key: xak\nX-Injected: 1"],
        ["--header", "X-Api-Key: xak\x00"],
    ],
    ids=["crlf-key", "lf-header", "nul-header"],
)
def test_a_line_break_in_a_key_or_header_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    with serve_recording() as (url, seen):
        code = main(["bench", "--url", url, *flags, "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert "control character" in captured.err and len(captured.err.splitlines()) == 1
    assert not seen.seen and not (tmp_path / "run").exists()  # refused before any request
