"""A value out of range is refused by the command's spec, once, before any work.

The range of a number lives on its spec's field (`Field(gt=0)`, `ge=1`, …): the
command makes the spec before it calls the api, so a refused value is one sentence
naming the flag, exit 2, and no server started, no request sent, no run directory
made. The api functions are replaced here by ones that fail the test if reached.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infertriage.api.specs import BenchSpec, ClientSpec, DiagnoseSpec, PlanSpec, TwinSpec
from infertriage.cli import main
from infertriage.schemas import UserError


def _never(*_: object, **__: object) -> None:
    raise AssertionError("the api was reached with a value the spec refuses")


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    for target in (
        "infertriage.cli.bench.api.run_bench",
        "infertriage.cli.diagnose.api.diagnose",
        "infertriage.cli.validate.run_validate",
        "infertriage.cli.compare.compare_ab",
        "infertriage.cli.plan.api.plan",
        "infertriage.cli.twin.api.serve_twin",
        "infertriage.cli.simulate.api.simulate",
    ):
        monkeypatch.setattr(target, _never)


URL = ["--url", "http://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("words", "sentence"),
    [
        (["bench", *URL, "--workers", "0"], "--workers must be at least 1 and at most 256, not 0."),
        (
            ["bench", *URL, "--workers", "300"],
            "--workers must be at least 1 and at most 256, not 300.",
        ),
        (["bench", *URL, "--duration", "0"], "--duration must be a positive number, not 0."),
        (["bench", *URL, "--num-requests", "0"], "--num-requests must be at least 1, not 0."),
        (["bench", *URL, "--seed", "-1"], "--seed must be 0 or more, not -1."),
        (["bench", *URL, "--concurrency", "4,0"], "--concurrency must be at least 1, not 0."),
        (["bench", *URL, "--rate", "2,-1"], "--rate values must be positive, not -1."),
        (["bench", *URL, "--max-model-len", "0"], "--max-model-len must be at least 1, not 0."),
        (["diagnose", "--duration", "0"], "--duration must be a positive number, not 0."),
        (["diagnose", "--tp", "0"], "--tp must be at least 1, not 0."),
        (["validate", "--rate", "-1"], "--rate must be a positive number, not -1."),
        (["validate", "--soak-rate", "nan"], "--soak-rate must be a positive number, not nan."),
        (["compare", *URL, *URL, "--blocks", "0"], "--blocks must be at least 1, not 0."),
        (
            [
                "plan",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "H100-SXM",
                "--gpu-memory-utilization",
                "2",
            ],
            "--gpu-memory-utilization must be a positive number and at most 1, not 2.",
        ),
        (["twin", "--port", "70000"], "--port must be a port from 0 to 65535, not 70000."),
        (["simulate", "--seed", "-1"], "--seed must be 0 or more, not -1."),
    ],
)
def test_a_refused_value_is_one_sentence_before_any_work(
    words: list[str],
    sentence: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(words) == 2
    out, err = capsys.readouterr()
    assert err.strip() == f"infertriage: error: {sentence}"
    assert out == ""
    assert list(tmp_path.iterdir()) == []  # no run directory, no file


@pytest.mark.parametrize(
    ("make", "sentence"),
    [
        (
            lambda: BenchSpec(url="u", workers=0),
            "--workers must be at least 1 and at most 256, not 0.",
        ),
        (lambda: BenchSpec(url="u", seed=-1), "--seed must be 0 or more, not -1."),
        (lambda: ClientSpec(max_model_len=0), "--max-model-len must be at least 1, not 0."),
        (
            lambda: DiagnoseSpec(profile_s=float("nan")),
            "--profile must be a positive number, not nan.",
        ),
        (lambda: TwinSpec(scenario="s", load_time_s=-1), "--load-time must be 0 or more"),
        (
            lambda: PlanSpec(model="m", gpu="g", max_model_len=8, measured_throughput_tok_s=0),
            "--measured-throughput must be a positive number, not 0.",
        ),
    ],
)
def test_a_spec_made_in_code_names_the_flag_too(make: object, sentence: str) -> None:
    """diagnose, validate and compare make a `BenchSpec` of their own: the same sentence."""
    assert callable(make)
    with pytest.raises(UserError) as caught:
        make()
    assert str(caught.value).startswith(sentence)


def test_a_bench_spec_keeps_the_workload_parsed_and_dumps_its_text() -> None:
    spec = BenchSpec(url="http://h/v1", workload="synthetic:input=8,output=4")
    assert spec.workload.options == (("input", "8"), ("output", "4"))
    assert spec.model_dump(mode="json")["workload"] == "synthetic:input=8,output=4"
    assert spec.run_config()["workload"] == "synthetic:input=8,output=4"
    assert BenchSpec.model_validate(spec.model_dump(mode="json")).workload == spec.workload


def test_a_field_unknown_or_of_the_wrong_type_is_the_callers_bug() -> None:
    """Only a range is the user's: anything else stays pydantic's error, a traceback."""
    with pytest.raises(ValidationError):
        BenchSpec(url="u", rate=4.0)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        BenchSpec(url="u", check_tokens="maybe")  # type: ignore[arg-type]
