"""`bench --find-max-rate` refuses what the search cannot run, in one sentence, exit 2."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main


@pytest.fixture(scope="module")
def refused() -> Iterator[str]:
    """A port bound and never listened on: a request reaching it would fail at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        pytest.param([], "needs an SLO", id="no SLO"),
        pytest.param(["--goodput", "ttft=200ms", "--rate", "4"], "own rates", id="with --rate"),
        pytest.param(["--slo", "ttft_p95=200ms", "--concurrency", "4"], "own rates", id="conc"),
        pytest.param(["--goodput", "ttft=200ms", "--sweep"], "own rates", id="with --sweep"),
        pytest.param(["--goodput", "ttft=200ms", "--attainment", "1"], "--attainment", id="att"),
        pytest.param(
            ["--goodput", "ttft=1s", "--rate-tolerance", "0"], "--rate-tolerance", id="tol"
        ),
        pytest.param(
            ["--goodput", "ttft=1s", "--max-rate-rule", "best"], "--max-rate-rule", id="rule"
        ),
        pytest.param(["--goodput", "ttft=1s", "--arrival", "constant"], "Poisson", id="arrival"),
    ],
)
def test_find_max_rate_refuses_in_one_sentence(
    extra: list[str],
    needle: str,
    refused: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["bench", "--url", refused, "--find-max-rate", *extra])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), err
    assert needle in lines[0], lines[0]
    assert out == "" and not list(tmp_path.rglob("run.json"))
