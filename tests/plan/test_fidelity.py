"""plan.fidelity: the packaged table of error under load against real vLLM, and the line a
user reads (covered Hopper GPUs state each regime's figures; every other generation says
its error under load is unknown)."""

from __future__ import annotations

import json
from importlib import resources

import pydantic
import pytest

from infertriage.plan import RegimeFidelity, ServingFidelity, get_gpu, serving_fidelity
from infertriage.plan.fidelity import _Table


def _packaged() -> dict[str, object]:
    text = resources.files("infertriage.plan").joinpath("data/fidelity.json").read_text("utf-8")
    document = json.loads(text)
    assert isinstance(document, dict)
    return document


def _error(figure: list[float]) -> str:
    return f"±{figure[0]:.0%} (worst {figure[1]:.0%})"


def test_the_packaged_table_validates_and_says_who_writes_it() -> None:
    document = _packaged()
    table = _Table.model_validate(document)
    assert "benchmarks/twin_vs_vllm.py --write" in table.note
    assert table.regimes and table.overloads.reproduced <= table.overloads.real


def test_a_hopper_gpu_states_every_regime_from_the_file() -> None:
    document = _packaged()
    regimes = document["regimes"]
    overloads = document["overloads"]
    assert isinstance(regimes, dict) and isinstance(overloads, dict)
    for name in ("H100-SXM", "H200"):
        fidelity = serving_fidelity(get_gpu(name))
        assert fidelity.covered and fidelity.generation == "hopper"
        assert [r.name for r in fidelity.regimes] == [
            n for n in ("moderate", "near saturation", "overloaded") if n in regimes
        ]
        statement = fidelity.statement()
        assert statement.startswith(f"under load vs {document['source']}")
        total = sum(int(row["stages"][0]) for row in regimes.values())
        assert f"{total} stages" in statement
        for regime in fidelity.regimes:
            row = regimes[regime.name]
            part = regime.statement()
            assert part in statement
            assert f"TTFT {_error(row['ttft'])}" in part
            assert f"per-token {_error(row['interval'])}" in part
            assert f"E2E {_error(row['e2e'])}" in part
        assert (
            f"overloads {overloads['reproduced']} of {overloads['real']} reproduced, "
            f"{overloads['false']} false"
        ) in statement


@pytest.mark.parametrize(
    ("gpu", "generation"),
    [("A100-80GB", "ampere"), ("L40S", "ada"), ("B200", "blackwell"), ("MI300X", "cdna3")],
)
def test_other_generations_say_their_error_under_load_is_unknown(gpu: str, generation: str) -> None:
    fidelity = serving_fidelity(get_gpu(gpu))
    assert not fidelity.covered and fidelity.regimes == ()
    assert fidelity.statement() == (
        f"no real serving measurement covers {generation} GPUs; error under load unknown"
    )


def test_a_regime_no_stage_reached_is_left_out() -> None:
    moderate = RegimeFidelity("moderate", 3, (0.05, 0.1), (0.02, 0.04), (0.03, 0.05))
    fidelity = ServingFidelity("hopper", True, "real vLLM on H100", (moderate,), 0, 0, 1)
    assert fidelity.statement() == (
        "under load vs real vLLM on H100, 3 stages: moderate load TTFT ±5% (worst 10%), "
        "per-token ±2% (worst 4%), E2E ±3% (worst 5%); overloads 0 of 0 reproduced, 1 false"
    )


def test_a_table_out_of_shape_is_refused() -> None:
    document = _packaged()
    regimes = document["regimes"]
    assert isinstance(regimes, dict)
    name, row = next(iter(regimes.items()))
    with pytest.raises(pydantic.ValidationError, match="exceeds worst"):
        _Table.model_validate({**document, "regimes": {name: {**row, "ttft": [0.5, 0.1]}}})
    with pytest.raises(pydantic.ValidationError):
        _Table.model_validate({**document, "regimes": {"idle": row}})
    with pytest.raises(pydantic.ValidationError):
        _Table.model_validate({**document, "extra": 1})
    with pytest.raises(pydantic.ValidationError, match="reproduced"):
        _Table.model_validate({**document, "overloads": {"real": 1, "reproduced": 2, "false": 0}})
