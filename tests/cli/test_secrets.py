"""Secrets: the key and `--header` values reach no file and no output, even when echoed.

The loopback server (tests/hostileserver.py) quotes the request's
`Authorization` and `X-Secret-Token` headers in its HTTP 400 and 401 bodies
and in an SSE error event, as a careless server does ("Incorrect API key
provided: Bearer sk-…"). After `bench` and `validate`, the whole run
directory, the Markdown and what was printed are searched for each secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.cli import main

from ..hostileserver import serve_hostile

KEY = "sk-test-0123456789abcdefSECRET"
TOKEN = "hdr-token-98765SECRET"
SMALL = ["--workload", "synthetic:input=8,output=4", "--concurrency", "2"]


def _leaks(root: Path, *texts: str) -> list[str]:
    """Where either secret appears: a file under `root`, or one of `texts`."""
    found = []
    for path in [p for p in root.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        found += [f"{path}: {s}" for s in (KEY, TOKEN) if s.encode() in data]
    for text in texts:
        found += [f"output: {s}" for s in (KEY, TOKEN) if s in text]
    return found


def test_bench_redacts_the_key_and_headers_echoed_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_hostile() as url:
        secrets = ["--api-key", KEY, "--header", f"X-Secret-Token: {TOKEN}"]
        code = main(["bench", "--url", url, "--num-requests", "8", *SMALL, *secrets,
                     "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert _leaks(tmp_path, captured.out, captured.err) == []
    records = (tmp_path / "run" / "requests.jsonl").read_text()
    # the server did echo them (a 400 and an error event), and both were redacted
    assert records.count("Incorrect API key provided: Bearer ***; token ***") == 2


@pytest.mark.slow
def test_validate_redacts_the_key_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    markdown = tmp_path / "validate.md"
    with serve_hostile() as url:
        code = main(["validate", "--url", url, "--duration", "1s", *SMALL,
                     "--out", str(tmp_path / "run"), "--markdown", str(markdown)])  # fmt: skip
    captured = capsys.readouterr()
    assert code in (0, 1)
    assert _leaks(tmp_path, captured.out, captured.err) == []
    assert "Bearer \\*\\*\\*" in markdown.read_text()  # a probe's detail quoted the echo


def test_a_401_that_echoes_a_wrong_key_leaks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_hostile(key="the-right-key-0000") as url:
        code = main(["bench", "--url", url, "--num-requests", "4", *SMALL, "--api-key", KEY,
                     "--out", str(tmp_path / "run")])  # fmt: skip
    captured = capsys.readouterr()
    assert code in (0, 2)  # 2 once a refused key stops the load at once
    assert "Traceback" not in captured.err
    assert _leaks(tmp_path, captured.out, captured.err) == []
