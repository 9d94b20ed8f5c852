"""diagnose --nvidia-smi-topo/--nccl-tests: the plan (and the parallelism rules reading it) on
the measured interconnect, kept in the run for --from-run; a bad file fails first."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.evidence import plan_signals
from infertriage.api.topology import keep_interconnect, kept_interconnect
from infertriage.schemas import Deployment, RunServerConfig, Signal, UserError

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
DEPLOYMENT = Deployment(model="llama-3.1-70b", gpu="H100-SXM", tensor_parallel=8)
MEASURED = [
    Signal(name="client.max_concurrency", value=64.0, unit="requests", source="client"),
    Signal(name="client.mean_prompt_tokens", value=1024.0, unit="tokens", source="client"),
    Signal(name="client.mean_output_tokens", value=256.0, unit="tokens", source="client"),
]


def _itl(signals: list[Signal]) -> float:
    return next(s.value for s in signals if s.name == "plan.decode_itl_roofline_s")


def test_the_measured_bus_bandwidth_slows_the_planned_decode(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    keep_interconnect(
        raw,
        DATA / "nvidia_smi_topo_h100x8_nvswitch.txt",
        (DATA / "all_reduce_perf_h100x8_nvlink.txt",),
    )
    kept = kept_interconnect(raw)
    assert kept is not None and kept[0] is not None and len(kept[1]) == 1
    catalogue = plan_signals(DEPLOYMENT, RunServerConfig(), MEASURED)
    measured = plan_signals(DEPLOYMENT, RunServerConfig(), MEASURED, kept)
    # 83.8 GB/s measured at the 1 MiB all-reduce, where the catalogue says 450 GB/s
    assert _itl(measured) > 1.1 * _itl(catalogue)
    assert kept_interconnect(tmp_path / "other") is None


def test_a_bad_nccl_tests_file_fails_before_anything_is_kept(tmp_path: Path) -> None:
    bad = tmp_path / "nccl.txt"
    bad.write_text("this is not nccl-tests output\n")
    with pytest.raises(UserError):
        keep_interconnect(tmp_path / "raw", None, (bad,))
    assert not (tmp_path / "raw").exists()


def _ceiling(signals: list[Signal]) -> float:
    return next(s.value for s in signals if s.name == "plan.throughput_roofline_tok_s")


def test_the_throughput_ceiling_is_the_batch_served_on_average() -> None:
    # --duration 1s: the measured level's window is mostly its drain, 5 of 16 streams in
    # flight on average; held against 16 the throughput read a third of the roofline
    # (hardware.below_roofline on every healthy scenario)
    peak = [*MEASURED[1:], Signal("client.max_concurrency", 16.0, "requests", "client")]
    drained = [*peak, Signal("client.mean_concurrency", 5.0, "requests", "client")]
    steady = [*peak, Signal("client.mean_concurrency", 16.0, "requests", "client")]
    at_peak = _ceiling(plan_signals(DEPLOYMENT, RunServerConfig(), peak))
    assert _ceiling(plan_signals(DEPLOYMENT, RunServerConfig(), steady)) == pytest.approx(at_peak)
    assert _ceiling(plan_signals(DEPLOYMENT, RunServerConfig(), drained)) == pytest.approx(
        at_peak * 5 / 16
    )
