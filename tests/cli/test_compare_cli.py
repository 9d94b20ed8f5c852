"""`compare --fail-on-regression` exit codes: 1 a regression, 3 inconclusive, 0 every metric judged.

Run directories hold synthetic closed-loop runs: the statistics are under test, not a server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.cli.compare import EXIT_REGRESSION
from infertriage.schemas.errors import EXIT_INCONCLUSIVE

from ..analyze.compare_helpers import closed_loop_run, write_run


def _compare(tmp_path: Path, base: int, run: int, *flags: str, **scales: float) -> list[str]:
    base_dir = write_run(tmp_path / "base", closed_loop_run(base, seed=1))
    run_dir = write_run(tmp_path / "run", closed_loop_run(run, seed=2, **scales))
    return ["compare", str(base_dir), str(run_dir), *flags]


def test_exit_codes_are_documented_and_distinct() -> None:
    assert (EXIT_REGRESSION, EXIT_INCONCLUSIVE) == (1, 3)


def test_448x_with_15_requests_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _compare(tmp_path, 35, 15, ttft=448.0)
    assert main([*args, "--fail-on-regression"]) == EXIT_REGRESSION
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("REGRESSION: ") and "ttft (c=4)" in last
    assert main(args) == 0  # without the flag, compare only reports


def test_tiny_sample_exits_3_and_says_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown = tmp_path / "compare.md"
    args = _compare(tmp_path, 3, 3, "--markdown", str(markdown))
    assert main([*args, "--fail-on-regression"]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    last = " ".join(out[out.rindex("INCONCLUSIVE: ") :].split())  # rich wraps the long line
    assert last.startswith("INCONCLUSIVE: 6 metric(s) could not be judged — ttft (c=4) needs")
    assert "error_rate (c=4) needs about 10 vs 10 requests." in last and last.endswith(".")
    assert "No regression" not in out
    assert "**INCONCLUSIVE: " in markdown.read_text() and "❔ **ttft**" in markdown.read_text()
    assert main(args) == 0


def test_json_carries_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _compare(tmp_path, 3, 3, "--json", "--fail-on-regression")
    assert main(args) == EXIT_INCONCLUSIVE
    document = json.loads(capsys.readouterr().out)
    assert document["verdict"] == "inconclusive" and document["inconclusive"] is True


def test_same_distribution_many_requests_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_compare(tmp_path, 400, 400), "--fail-on-regression"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "No regression."


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    main(["compare", "--help"])
    # the help is a bordered table: its wrap points depend on the widest option's name
    text = " ".join(capsys.readouterr().out.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())
    assert "Exit 1 when any metric regressed" in text and "exit 3 when none did" in text
