"""diagnose --compare-run: scaling across GPU counts, from two real twin runs.

Run A is one H100-PCIe card (a scenario file written here); run B is the
packaged `tp-over-pcie` scenario, eight such cards tensor-parallel over PCIe.
Re-diagnosing B with `--compare-run A` must give the scaling signals (from
the two runs' measured throughputs and their roofline plans) and flag the
scaling as a parallelism bottleneck of B; seen from A, the smaller run, it is
only a warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.cli import main
from infertriage.schemas import Layer, Status

pytestmark = pytest.mark.slow

ONE_CARD = (
    "description: one H100 PCIe card\ngpu: H100-PCIe\ntensor_parallel: 1\ninterconnect: pcie\n"
)


def _signals(run: Path) -> dict[str, float]:
    lines = (run / "signals.jsonl").read_text().splitlines()
    return {s["name"]: s["value"] for s in map(json.loads, lines)}


def test_eight_cards_over_pcie_scale_below_their_plan(tmp_path: Path) -> None:
    scenario = tmp_path / "one-card.yaml"
    scenario.write_text(ONE_CARD)
    one, eight = tmp_path / "one", tmp_path / "eight"
    diagnose(scenario=str(scenario), duration_s=5.0, concurrency=8, out=one)
    diagnose(scenario="tp-over-pcie", duration_s=5.0, concurrency=8, out=eight)
    result = diagnose(from_run=eight, compare_run=one)
    small, large = _signals(one), _signals(eight)
    assert large["scaling.gpu_ratio"] == 8
    measured = large["client.throughput_tok_s"] / small["client.throughput_tok_s"] / 8
    assert large["scaling.efficiency"] == pytest.approx(measured)
    planned = large["plan.throughput_roofline_tok_s"] / small["plan.throughput_roofline_tok_s"] / 8
    assert large["scaling.plan_efficiency"] == pytest.approx(planned)
    parallelism = result.diagnosis.layer(Layer.PARALLELISM)
    finding = next(f for f in parallelism.findings if f.id == "parallelism.scaling_below_plan")
    assert finding.status is Status.BOTTLENECK and "8× the GPUs" in finding.title
    # the snapshot of A travels with B: --from-run alone gives the same map
    assert (eight / "raw" / "compare-run.json").is_file()
    assert diagnose(from_run=eight).diagnosis == result.diagnosis
    # from the smaller run the same comparison is a warning, not its bottleneck
    seen_from_one = diagnose(from_run=one, compare_run=eight).diagnosis
    warning = next(
        f
        for f in seen_from_one.layer(Layer.PARALLELISM).findings
        if f.id == "parallelism.scaling_below_plan"
    )
    assert warning.status is Status.WARNING


def test_a_compare_run_without_signals_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "bench-run"
    other.mkdir()
    (other / "run.json").write_text("{}")
    code = main(["diagnose", "--from-run", str(other), "--compare-run", str(tmp_path / "nope")])
    assert code == 2
    assert "--compare-run" in capsys.readouterr().err
