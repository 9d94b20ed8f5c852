"""twin, level 2: what `simulate` returns (pydantic, so `--json` is one `model_dump_json`).

Takes nothing; gives `SimulationResult` and its `LatencyPercentiles` (the
`--json` shape of one latency: count, mean and percentiles in seconds), with
`percentiles` to build one from samples through `analyze.stats.distribution`'s
`describe`, the one summary of a distribution, which `bench` uses too. All times
in seconds, shares and activities as fractions 0..1.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from infertriage.analyze.stats.distribution import describe

__all__ = ["LatencyPercentiles", "SimulationResult", "percentiles"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LatencyPercentiles(_Frozen):
    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p95_s: float
    p99_s: float


def percentiles(samples: Sequence[float]) -> LatencyPercentiles:
    """Mean and percentiles (numpy's linear interpolation); all zero without samples."""
    dist = describe(samples)
    if dist is None:
        return LatencyPercentiles(count=0, mean_s=0.0, p50_s=0.0, p90_s=0.0, p95_s=0.0, p99_s=0.0)
    return LatencyPercentiles(
        count=dist.count,
        mean_s=dist.mean,
        p50_s=dist.p50,
        p90_s=dist.p90,
        p95_s=dist.p95,
        p99_s=dist.p99,
    )


class SimulationResult(_Frozen):
    """One `simulate` run: client-side latencies (front end included), engine and GPU figures."""

    scenario: str
    rate_rps: float
    num_requests: int
    input_len: int | None
    output_len: int | None
    arrivals: str
    duration_s: float  # simulated: first arrival to last delivery
    wall_s: float  # real seconds the simulation took
    speedup: float  # duration_s / wall_s

    num_completed: int
    num_errors: int
    ttft: LatencyPercentiles  # client: arrival → first chunk delivered
    itl: LatencyPercentiles  # client: gaps between delivered chunks
    e2e: LatencyPercentiles
    server_ttft: LatencyPercentiles  # engine: engine arrival → first token
    server_itl: LatencyPercentiles  # engine: gaps between a request's output steps
    queue_time: LatencyPercentiles  # engine: arrival → first scheduled
    output_throughput_tok_s: float
    request_throughput_rps: float
    mean_queue_s: float
    queue_share_of_ttft: float  # mean queue time / mean TTFT
    mean_frontend_wait_s: float  # arrival → the engine has the tokenized prompt

    num_preemptions: int
    num_gpu_blocks: int
    kv_usage_mean: float  # step-time weighted
    kv_usage_max: float
    prefix_cache_hit_rate: float
    num_leaked_blocks: int
    free_blocks_trajectory: list[tuple[float, int]]  # (ts, free blocks) after each finish
    mean_running: float  # step-time weighted batch size

    spec_acceptance_rate: float | None  # accepted / drafted; None without speculation
    spec_acceptance_per_pos: list[float]  # share of drafts accepted at each position
    spec_mean_accepted_tokens: float | None  # per draft

    comm_share: float  # all-reduce time / step time
    launch_gap_share: float  # eager launch gaps / step time
    cpu_share: float  # host time with the GPU idle / step time
    decode_memory_bound_share: float  # of decode-only step time, memory-bound
    gpu_util: float  # DCGM GPU_UTIL estimate over the run
    sm_active: float
    tensor_active: float
    dram_active: float
    frontend_busy: float  # front-end worker busy time / duration
