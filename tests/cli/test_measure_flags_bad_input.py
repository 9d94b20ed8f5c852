"""Issue 34's flags given bad values or in combinations that mean nothing: each is refused
in one sentence on stderr with exit 2, before any request (the URL refuses connections,
so a flag that slipped through would end in a connection error instead)."""

from __future__ import annotations

import socket

import pytest

from infertriage.cli import main

SEARCH = ["--find-max-rate", "--goodput", "ttft=1s"]
MLPERF = ["--standard", "mlperf", "--mlperf-model", "llama3_1-8b"]

CASES = (
    [
        pytest.param([*SEARCH, "--attainment", value], "--attainment", id=f"attainment {value}")
        for value in ("0", "1", "1.5", "nan", "-0.2")
    ]
    + [
        pytest.param([*SEARCH, "--rate-tolerance", v], "--rate-tolerance", id=f"tolerance {v}")
        for value in ("0", "-1", "nan", "1")
        for v in (value,)
    ]
    + [
        pytest.param([*SEARCH, "--max-rate-rule", "bogus"], "--max-rate-rule", id="rule bogus"),
        pytest.param(["--find-max-rate"], "--goodput or --slo", id="search without an SLO"),
        pytest.param([*SEARCH, "--rate", "1"], "drop --rate", id="search with --rate"),
        pytest.param(
            [*SEARCH, "--concurrency", "2"], "drop --rate", id="search with --concurrency"
        ),
        pytest.param([*SEARCH, "--sweep"], "drop --rate", id="search with --sweep"),
        pytest.param([*SEARCH, "--arrival", "constant"], "--arrival", id="search, constant"),
        pytest.param(
            ["--rate", "1", "--attainment", "0.95"], "--find-max-rate", id="attainment alone"
        ),
        pytest.param(["--rate", "1", "--rate-tolerance", "0.1"], "--find-max-rate", id="tolerance"),
        pytest.param(
            ["--rate", "1", "--max-rate-rule", "mlperf-server"], "--find-max-rate", id="rule"
        ),
        pytest.param(
            ["--rate", "1", "--mlperf-model", "llama3_1-8b"], "--standard", id="model alone"
        ),
        pytest.param(["--rate", "1", "--standard", "bogus"], "--standard", id="standard bogus"),
        pytest.param(["--rate", "1", "--standard", "mlperf"], "--mlperf-model", id="no model"),
        pytest.param(
            ["--rate", "1", "--standard", "mlperf", "--mlperf-model", "nope"], "nope", id="model?"
        ),
        pytest.param([*MLPERF, "--sweep"], "--sweep", id="mlperf with --sweep"),
        pytest.param([*MLPERF, "--rate", "inf"], "finite", id="mlperf at inf"),
        pytest.param([*MLPERF, *SEARCH], "--max-rate-rule mlperf-server", id="mlperf searching"),
    ]
)


@pytest.fixture(scope="module")
def refused() -> str:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(("words", "named"), CASES)
def test_bench_refuses_in_one_sentence(
    words: list[str], named: str, refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench", "--url", refused, "--workload", "synthetic:input=8,output=4", *words])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "", (out, err)
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), err
    assert named in lines[0] and "connect" not in lines[0], lines[0]


def test_validate_refuses_a_model_without_the_standard(
    refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "--url", refused, "--mlperf-model", "llama3_1-8b"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "add --standard mlperf" in err, err
