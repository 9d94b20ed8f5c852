"""twin, level 2: what `simulate` returns (pydantic, so `--json` is one `model_dump_json`).

Takes nothing; gives `SimulationResult`, its `StageSummary`s (one per load stage,
in `bench`'s terms) and its `LatencyPercentiles` (the `--json` shape of one latency:
count, mean and percentiles in seconds), with `percentiles` to build one from
samples through `analyze.stats.distribution`'s `describe`, the one summary of a
distribution, which `bench` uses too, and `sketch_percentiles` from a streamed
`QuantileSketch` (within its 0.5 % of numpy's percentiles; count and mean exact).
All times in seconds, shares and activities as fractions 0..1.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.analyze.stats.distribution import describe
from infertriage.analyze.stats.sketch import QuantileSketch
from infertriage.schemas import FrozenModel

__all__ = [
    "LatencyPercentiles",
    "SimulationResult",
    "StageSummary",
    "percentiles",
    "sketch_percentiles",
]


class LatencyPercentiles(FrozenModel):
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


def sketch_percentiles(sketch: QuantileSketch) -> LatencyPercentiles:
    """The same summary of a streamed sketch: count and mean exact, percentiles within its error."""
    p50, p90, p95, p99 = sketch.quantiles([0.5, 0.9, 0.95, 0.99]).tolist()
    return LatencyPercentiles(
        count=sketch.count, mean_s=sketch.mean, p50_s=p50, p90_s=p90, p95_s=p95, p99_s=p99
    )


class StageSummary(FrozenModel):
    """One load stage, its requests counted by the stage they arrived in (as inference-perf).

    The latencies are the client's, of the requests that completed: TTFT, ITL per token as
    `bench` counts it (a chunk of k tokens after a gap g is k gaps of g/k), TPOT =
    (E2E − TTFT)/(output tokens − 1) per request, E2E. Throughputs are the completed
    requests' over the stage's start to the last of them delivered.
    """

    index: int
    rate_rps: float  # asked (a trace: its mean rate)
    duration_s: float  # asked (one rate: num_requests / rate; a trace: its span)
    start_ts: float
    num_requests: int  # arrived (sent) in the stage
    num_completed: int
    num_failed: int  # errors, rejections and time-outs
    num_timed_out: int
    achieved_rate_rps: float  # (arrivals − 1) / (last arrival − first) in the stage
    ttft: LatencyPercentiles
    itl: LatencyPercentiles
    tpot: LatencyPercentiles
    e2e: LatencyPercentiles
    output_throughput_tok_s: float
    request_throughput_rps: float
    mean_running: float  # step-time weighted batch size of the steps started in the stage's time


class SimulationResult(FrozenModel):
    """One `simulate` run: client-side latencies (front end included), engine and GPU figures."""

    scenario: str
    rate_rps: float  # asked; with stages their mean (requests asked over their total time)
    num_requests: int
    input_len: int | None
    output_len: int | None
    arrivals: str
    workload: str  # the workload spec sent (the length options' one without --workload)
    timeout_s: float | None  # the client's time-out per request; None: none
    duration_s: float  # simulated: first arrival to last delivery
    wall_s: float  # real seconds the simulation took
    speedup: float  # duration_s / wall_s

    num_completed: int
    num_errors: int  # the engine's (an injected fault)
    num_timed_out: int  # the client gave up: not finished timeout_s after it was sent
    num_rejected: int  # the engine refused the prompt (longer than the context)
    ttft: LatencyPercentiles  # client: arrival → first chunk delivered
    itl: LatencyPercentiles  # client: gaps between delivered chunks, per token (as bench)
    tpot: LatencyPercentiles  # client: (E2E − TTFT)/(output tokens − 1), per request
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
    # (ts, free blocks) after each finish, thinned evenly to at most 4,096 points, the last kept
    free_blocks_trajectory: list[tuple[float, int]]
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

    stages: list[StageSummary]  # one per load stage (one for --rate or a trace)
    fidelity: str  # the twin's measured error under load on the scenario's GPU, or unknown
    # the CPU offload tier: its hits per token asked (None without one), blocks in and out
    offload_hit_rate: float | None = None
    offload_stored_blocks: int = 0
    offload_loaded_blocks: int = 0
