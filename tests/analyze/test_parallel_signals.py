"""analyze.signals.parallel: the EP ranks' balance (vLLM's gauges, SGLang's summary), each
GPU's busy share kept apart, and the requests in flight; nothing without the evidence."""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.parallel import parallel_signals
from infertriage.schemas import Sample


def values(samples: list[Sample], start: float = 0.0, end: float = 10.0) -> dict[str, float]:
    return {s.name: s.value for s in parallel_signals(samples, start, end)}


def test_vllm_gauges_give_the_mean_balance_and_the_worst_layer() -> None:
    samples = [
        *(Sample(t, "ep.balancedness_avg", v, {}) for t, v in ((1, 0.5), (5, 0.3), (20, 0.9))),
        *(Sample(t, "ep.balancedness_min", v, {}) for t, v in ((1, 0.4), (5, 0.2))),
    ]
    found = values(samples)
    assert found["ep.balancedness_mean"] == pytest.approx(0.4)  # the sample at 20 s is outside
    assert found["ep.hot_rank_ratio"] == pytest.approx(2.5)
    assert found["ep.balancedness_worst"] == pytest.approx(0.2)


def test_sglang_summary_reads_its_growth_over_the_window() -> None:
    mode = {"forward_mode": "decode", "moe_ep_rank": "0"}
    samples = [
        Sample(0, "ep.balancedness_sum", 90.0, mode),
        Sample(0, "ep.balancedness_count", 100.0, mode),
        Sample(10, "ep.balancedness_sum", 140.0, mode),  # 100 passes at 0.5 in the window
        Sample(10, "ep.balancedness_count", 200.0, mode),
    ]
    found = values(samples)
    assert found["ep.balancedness_mean"] == pytest.approx(0.5)
    assert "ep.balancedness_worst" not in found
    one_scrape = values(samples[:2], 0, 0)  # one scrape: its lifetime mean
    assert one_scrape["ep.balancedness_mean"] == pytest.approx(0.9)


def _gpu(t: float, index: int, busy: float, field: str = "gpu.gr_engine_active") -> Sample:
    return Sample(t, field, busy, {"gpu": str(index), "UUID": f"GPU-{index}", "Hostname": "h"})


def test_each_gpu_is_read_apart_and_an_idle_spare_gpu_left_out() -> None:
    busy = {0: 0.3, 1: 0.3, 2: 0.3, 3: 0.9, 4: 0.0}  # GPU 4 serves nothing
    samples = [_gpu(t, i, b) for t in (1, 2, 3) for i, b in busy.items()]
    samples += [_gpu(2, i, 1.0, "gpu.util") for i in busy]  # GR_ENGINE_ACTIVE wins over it
    found = values(samples)
    assert found["gpu.count"] == 5
    assert found["gpu.busy_by_gpu_max"] == pytest.approx(0.9)
    assert found["gpu.busy_by_gpu_min"] == pytest.approx(0.3)
    assert found["gpu.busy_by_gpu_mean"] == pytest.approx(0.45)


def test_in_flight_sums_the_ranks_at_each_scrape() -> None:
    samples = [
        Sample(t, "queue.running", v, {"dp_rank": r})
        for t, r, v in ((1, "0", 3), (1, "1", 5), (2, "0", 4), (2, "1", 4))
    ]
    assert values(samples)["pp.requests_in_flight"] == pytest.approx(8.0)


def test_nothing_without_the_evidence() -> None:
    assert values([]) == {}
    one_gpu = values([_gpu(1, 0, 0.9)])
    assert one_gpu == {"gpu.count": 1}  # one GPU: nothing to compare


def test_sm_active_wins_over_the_engine_counters_a_nccl_wait_keeps_busy() -> None:
    samples = [_gpu(1, i, 1.0) for i in range(4)]  # every stage "active": waiting in NCCL
    samples += [_gpu(1, i, sm, "gpu.sm_active") for i, sm in enumerate((0.3, 0.3, 0.3, 0.9))]
    found = values(samples)
    assert found["gpu.busy_by_gpu_max"] == pytest.approx(0.9)
    assert found["gpu.busy_by_gpu_mean"] == pytest.approx(0.45)
