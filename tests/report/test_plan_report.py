"""report.plan: `plan`'s parameter counts and its statement of the cost model's error."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infertriage.api.plan import plan as run_plan
from infertriage.api.specs import PlanSpec
from infertriage.plan import RooflineParams
from infertriage.report.plan import plan_to_json


def test_plan_json_reports_parameters_and_its_error() -> None:
    report = run_plan(
        PlanSpec(model="mixtral-8x7b", gpu="H100-SXM", tp=2, max_model_len=4096, concurrency=1)
    )
    doc = plan_to_json(report)
    params = doc["parameters"]
    assert isinstance(params, dict)
    assert params["total"] == pytest.approx(46.70e9, rel=0.01)
    assert params["active"] == pytest.approx(12.88e9, rel=0.01)
    assert "lm_head" in str(params["convention"])
    accuracy = doc["accuracy"]
    assert isinstance(accuracy, dict)
    # Fitted on Mixtral runs with synthetic weights, and it says what that leaves unmeasured.
    assert accuracy["covered"] is True
    statement = str(accuracy["statement"])
    assert "Mixtral-8x7B" in statement and "synthetic weights" in statement
    assert "not measured" in statement
    low, high = accuracy["itl_range_s"]
    assert low < report.plan.roofline.itl_s < high


def test_moe_on_a_gpu_without_moe_points_says_its_error_is_unknown() -> None:
    report = run_plan(
        PlanSpec(model="mixtral-8x7b", gpu="B200", tp=2, max_model_len=4096, concurrency=1)
    )
    accuracy = plan_to_json(report)["accuracy"]
    assert isinstance(accuracy, dict)
    assert accuracy["covered"] is False
    assert "error unknown" in str(accuracy["statement"])


def test_covered_dense_plan_states_its_published_error() -> None:
    report = run_plan(
        PlanSpec(model="llama-3.1-8b", gpu="H100-SXM", max_model_len=4096, concurrency=1)
    )
    doc = plan_to_json(report)
    accuracy = doc["accuracy"]
    assert isinstance(accuracy, dict)
    assert accuracy["covered"] is True and accuracy["num_points"] > 1000
    assert 0 < accuracy["median_abs_error"] <= 0.1
    params = doc["parameters"]
    assert isinstance(params, dict)
    assert params["total"] == params["active"] == pytest.approx(8.03e9, rel=0.01)


def test_serving_fidelity_is_stated_off_hopper_and_with_custom_constants_as_unknown() -> None:
    report = run_plan(PlanSpec(model="llama-3.1-8b", gpu="L40S", max_model_len=4096, concurrency=1))
    fidelity = plan_to_json(report)["serving_fidelity"]
    assert isinstance(fidelity, dict)
    assert fidelity["covered"] is False and fidelity["regimes"] is None
    assert fidelity["statement"] == (
        "no real serving measurement covers ada GPUs; error under load unknown"
    )
    hopper = run_plan(
        PlanSpec(model="llama-3.1-8b", gpu="H100-SXM", max_model_len=4096, concurrency=1)
    )
    inputs = replace(hopper.plan.inputs, roofline=RooflineParams())
    custom = replace(hopper, plan=replace(hopper.plan, inputs=inputs))
    fidelity = plan_to_json(custom)["serving_fidelity"]
    assert isinstance(fidelity, dict)
    assert fidelity["covered"] is False and fidelity["regimes"] is None
    assert "error under load unknown" in str(fidelity["statement"])
