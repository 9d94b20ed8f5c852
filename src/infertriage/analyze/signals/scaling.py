"""analyze.signals, level 1: scaling across GPU counts — two runs of one service at different sizes.

Takes the signals of this run and of another run of the same service at a
different number of GPUs (`diagnose --compare-run DIR`), by name; gives
`scaling.*` signals, always from the smaller run to the larger: the GPU
ratio, the measured output-throughput ratio over it (`scaling.efficiency`,
1.0 is linear), and the same for the roofline plan of each deployment at the
batch each run reached (`scaling.plan_efficiency`), which says what the
hardware allows: all-reduce cost grows with the tensor-parallel size, so
even a perfect deployment scales below 1.0. A run's GPU count is its
tensor-parallel size times its replicas; `scaling.this_is_larger` says
which of the two this run is (the finding is a bottleneck of the larger).
"""

from __future__ import annotations

from collections.abc import Mapping

from infertriage.schemas import Signal

__all__ = ["num_gpus", "scaling_signals"]

_THROUGHPUT = "client.throughput_tok_s"
_PLAN = "plan.throughput_roofline_tok_s"


def num_gpus(signals: Mapping[str, float]) -> float:
    return signals.get("config.tensor_parallel", 1.0) * signals.get("fleet.replicas", 1.0)


def scaling_signals(this: Mapping[str, float], other: Mapping[str, float]) -> list[Signal]:
    """Empty when the two runs use as many GPUs or either lacks a measured throughput."""
    small, large = sorted((this, other), key=num_gpus)
    gpu_ratio = num_gpus(large) / num_gpus(small)
    if gpu_ratio <= 1.0 or not small.get(_THROUGHPUT) or not large.get(_THROUGHPUT):
        return []
    measured = large[_THROUGHPUT] / small[_THROUGHPUT]
    this_larger = 1.0 if large is this else 0.0
    out = [
        Signal("scaling.gpu_ratio", gpu_ratio, "1", "compare-run"),
        Signal("scaling.this_is_larger", this_larger, "bool", "compare-run"),
        Signal("scaling.efficiency", measured / gpu_ratio, "fraction", "compare-run"),
    ]
    if small.get(_PLAN) and large.get(_PLAN):
        planned = large[_PLAN] / small[_PLAN]
        out.append(Signal("scaling.plan_efficiency", planned / gpu_ratio, "fraction", "plan"))
    return out
