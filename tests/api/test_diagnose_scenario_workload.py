"""diagnose: a twin scenario's documented workload is sent when no --workload is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import load_workload
from infertriage.api.specs import DiagnoseSpec
from infertriage.schemas import UserError
from infertriage.workload import DEFAULT_WORKLOAD, parse_workload


def test_a_scenario_with_a_documented_workload_is_diagnosed_under_it() -> None:
    assert load_workload(DiagnoseSpec(scenario="pd-ratio")).text == "synthetic:input=7000,output=32"


def test_the_chat_mix_otherwise_and_a_given_workload_always_wins() -> None:
    assert load_workload(DiagnoseSpec(scenario="healthy")).text == DEFAULT_WORKLOAD
    given = parse_workload("synthetic:input=64,output=8")
    assert load_workload(DiagnoseSpec(scenario="pd-ratio", workload=given)) == given
    # a real server is not a scenario: its scenario's workload is never read
    url = DiagnoseSpec(url="http://127.0.0.1:9", scenario="pd-ratio")
    assert load_workload(url).text == DEFAULT_WORKLOAD


def test_a_scenario_file_with_a_bad_workload_is_one_sentence_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("workload: 'bogus'\n")
    with pytest.raises(UserError, match=r"the workload of scenario .*mine\.yaml: unknown workload"):
        load_workload(DiagnoseSpec(scenario=str(path)))
