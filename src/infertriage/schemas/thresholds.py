"""schemas, level 0: the one frozen set of thresholds that every rule reads.

Defaults are docs/architecture.md's (interactive SLO profile). `--slo` overrides
them with a file (YAML or JSON mapping) or an inline list such as
`ttft_p95=200ms,itl_p95=50ms`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import load_yaml, quoted, read_small_text, why_missing
from infertriage.schemas.units import parse_duration, parse_fraction

__all__ = ["SloProfile", "Thresholds", "load_thresholds", "slo_file_keys", "stored_thresholds"]


class SloProfile(StrEnum):
    INTERACTIVE = "interactive"  # latency SLOs: TTFT and ITL
    BATCH = "batch"  # throughput: tokens per second


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every limit a rule compares against. Seconds and fractions, never ms or percent."""

    profile: SloProfile = SloProfile.INTERACTIVE
    ttft_p95_s: float = 0.200
    itl_p95_s: float = 0.050
    error_rate: float = 0.001
    gpu_memory_headroom: float = 0.10
    sm_active: float = 0.80
    dram_active_decode: float = 0.70
    tensor_active_prefill: float = 0.90
    alert_ttft_p95_s: float = 0.500
    min_throughput_tok_s: float = 0.0
    # client and server on one host: its CPU is saturated when busy this share of the time
    # and either more threads are runnable per core than this, or the server's threads
    # waited for a CPU this share of their runnable time (a caveat, never a bottleneck)
    host_cpu_saturated: float = 0.90
    host_run_queue_per_core: float = 1.5
    server_cpu_wait_share: float = 0.20
    # ... and the CPU that is not the server's (the client, other processes) is at least this
    # share of the host: a server that saturates the host on its own is not contended
    host_other_cpu_share: float = 0.25
    # kernel launches: GPU time idle between kernels (CUDA graphs off) that is a finding, and
    # the share of the gap to the roofline it must explain to be a bottleneck without an SLO
    # miss; idle this much is a bottleneck whatever the SLOs and the roofline say
    launch_gap_fraction: float = 0.15
    launch_gap_roofline_share: float = 0.20
    launch_bound_fraction: float = 0.50
    # prefill starved by the step budget: prefill (and, with seats free, the wait to be
    # scheduled) this share of TTFT, and prompts this many budgets long on average
    prefill_ttft_share: float = 0.50
    prompt_steps: float = 1.5
    # ... or, when requests queue with seats free and KV room, by the budget's throughput:
    # the tokens a step leaves after its decodes hold less than this many typical prompts
    # (hits excluded), so prompts are prefilled one at a time and arrivals wait in line, or
    # the prompts arriving need this share of the prefill tokens the budget's steps leave
    budget_prompt_fit: float = 1.0
    budget_load: float = 0.5
    # kernel layer, from a trace. The GPU idle with no kernel queued this share of the time
    # waits on the host (scheduling, sampling).
    host_wait_fraction: float = 0.30
    # Synchronisations per step: vLLM's sampler copies the sampled token ids to the host once
    # every step (`.tolist()`), so one per step is the engine's own and cannot be removed
    # short of async scheduling; a second one is avoidable (`.item()`, `.cpu()`, a print).
    syncs_per_step: float = 2.0
    # launches whose GPU time is shorter than the CPU call that launched them, outside
    # CUDA graphs: launch overhead sets the pace
    short_kernel_fraction: float = 0.50
    # hardware layer, from a trace: host↔device bytes through pageable memory (staged by the
    # driver, never overlapping kernels), when copies take at least this share of GPU time
    pageable_fraction: float = 0.50
    min_memcpy_fraction: float = 0.01

    # --- kernel layer ---
    # CUDA graphs are in use when at least this share of kernel time replays from graphs
    cuda_graph_fraction_on: float = 0.50
    # decode stats lines (with requests running) that ran outside CUDA graphs: a finding at
    # this share of them
    eager_decode_share: float = 0.50
    # and a bottleneck (with the ITL SLO missed) when those steps take this long or less: one
    # step's hundreds of host launches (µs each) are then a large share of it
    eager_decode_step_s: float = 0.025
    # ... and at least this many decode lines ran eagerly (one line is a moment, not a run)
    eager_decode_min_lines: float = 3.0
    # torch.compile recompilations: one is a finding, dynamo's default limit (8) is the worst
    recompilations: float = 1.0
    recompilations_full: float = 8.0

    # --- application layer ---
    # client TTFT p50 over the server's by at least this (and by the server's own TTFT):
    # the wait lies in front of the engine
    client_ttft_gap_s: float = 0.05
    # the API server's event loop (one thread) this busy queues every stream behind the
    # others; lower than the engine thread's, whose busy loop is its normal work
    frontend_thread_busy: float = 0.80
    # the API server's CPU per streamed token (HTTP, detokenising, serialising each chunk):
    # a lean one spends tens of µs; at this much, per-token front-end work is a finding when
    # it also takes `frontend_token_share` of every inter-token interval (its CPU cost per
    # token × the tokens streamed per second: the share of each interval it works)
    frontend_token_cost_s: float = 150e-6
    frontend_token_share: float = 0.20
    # ... where the API server shares a process (a GIL, a loop) with the engine core. Apart
    # from it (vLLM V1) the engine steps on regardless: per-token work delays the chunks only
    # once the API server's busiest thread nears a core
    frontend_busy_apart: float = 0.70
    # client ITL p95 this many times the server's: something between buffers the stream
    client_itl_over_server: float = 3.0
    # streams cut before their end, as a share of requests
    stream_cut_fraction: float = 0.05
    # the busiest replica over the mean replica, as `metrics --prometheus` flags
    replica_imbalance: float = 1.5
    # the floor under both load ratios (replicas, data-parallel ranks): uneven load is named
    # only when the busiest one carries at least this many requests (running + waiting) more
    # than the mean one; replicas or ranks that each hold a request or less (a light load
    # split three ways) are mostly idle, and their ratio is a few arrivals' chance
    min_excess_requests: float = 1.0
    # or when an even split of the requests the window finished would give one replica as
    # many as the busiest got with at most this probability (the replicas' request counts:
    # a real routing skew, even at a light load the queue gauges barely see)
    routing_chance_max: float = 0.01
    # an error rate (or a 429 share) this high is the worst it gets (severity 1)
    error_rate_full: float = 0.10

    # --- hardware layer ---
    # below this decode batch, batching still buys throughput on a bandwidth-bound GPU
    hbm_min_decode_batch: float = 8.0
    # a latency this close to its SLO has no headroom left: a ceiling met there is a warning
    slo_headroom: float = 0.8
    # throughput below this share of the plan's roofline for the batch reached
    roofline_efficiency: float = 0.50
    # PCIe link utilisation that is saturated
    pcie_saturated: float = 0.80

    # --- memory layer ---
    # KV usage that is a full cache
    kv_full: float = 0.95
    # KV usage left once the load has drained that is a leak
    kv_drain_residue: float = 0.02
    # on a large cache a leak is a small share of it: still a leak when this share of the
    # load's peak stayed taken with nothing running, and usage is above the gauge's floor
    kv_leak_of_peak: float = 0.50
    kv_leak_floor: float = 0.002
    # the gauge's rounding: blocks within it count as free, and headroom within it is met
    kv_usage_rounding: float = 0.005
    # prefix-cache hits below this share of the shared-prefix fraction
    prefix_hit_share: float = 0.50
    # a hit rate held against the prefix reuse sent is judged over at least this many prompts
    # (both rules that compare them, and the data-parallel ranks' spread): over two, one
    # routed to the rank holding its prefix and one not, either rate is chance
    prefix_min_prompts: float = 10.0
    # a KV offload tier (issue 33) that does not pay: its hits below this share of the tokens
    # asked of it (the GPU cache's misses), once this many tokens were asked; or loading a
    # token from it this many times the deployment's recompute (prefill) time per token; a
    # host tier this full evicts what it just stored
    offload_hit_share: float = 0.05
    offload_min_queries: float = 10_000.0
    offload_load_vs_recompute: float = 1.0
    offload_tier_full: float = 0.98
    # prompts longer than the plan's tokens per request by this factor
    plan_slack: float = 1.2

    # --- parallelism layer ---
    # communication's share of GPU time that is a finding, and a bottleneck
    comm_share: float = 0.30
    comm_bound: float = 0.45
    # communication overlapping compute less than this, when comm is at least min_comm_share
    poor_overlap: float = 0.20
    min_comm_share: float = 0.10
    # (max − min) / max of the ranks' compute time
    rank_skew: float = 0.10
    # the busiest data-parallel rank's running + waiting over the mean rank's; a bottleneck
    # when requests wait there while another rank has room, or when it runs at least
    # dp_busy_batch requests while another rank runs none (its GPUs idle). Uneven load short
    # of those is named only when the busiest rank carries at least min_excess_requests
    # more than the mean rank (see the application layer's)
    dp_imbalance: float = 1.5
    dp_busy_batch: float = 8.0
    # prefill/decode disaggregation. Over RDMA (≥ 100 Gb/s, 12.5 GB/s) or NVLink a request's
    # KV (~0.1 MiB a token for an 8B model: 100 MiB for 1k tokens) crosses in ~10 ms, a few
    # percent of a first token that also waits for the prefill; the mean transfer at
    # pd_transfer_share of the TTFT (an upper bound of it: both roles' server TTFT added) is
    # a finding, at pd_transfer_bound a bottleneck; an achieved rate under
    # pd_slow_link_bytes_s (16 Gb/s: below any RDMA NIC, where a TCP fallback lands) is a
    # finding once the transfers cost pd_link_share of the TTFT; a failing transfer is
    # always a finding (pd_transfer_failures of those tried: one in a hundred, not noise);
    # pd_transfer_queue requests queued for a transfer per decode instance (SGLang's transfer
    # and in-flight queues) mean the link, not the GPUs, sets the pace
    pd_transfer_share: float = 0.30
    pd_transfer_bound: float = 0.50
    pd_slow_link_bytes_s: float = 2e9
    pd_link_share: float = 0.10
    pd_transfer_failures: float = 0.01
    pd_transfer_queue: float = 8.0
    # a pool queues with pd_pool_queue requests waiting per instance (the depth at which the
    # log rules call a queue a symptom); the other pool runs far below its capacity with its
    # KV cache under pd_pool_room and, where its seats are known, under pd_pool_room of them;
    # a prefill pool is idle at pd_idle_running requests or fewer running per instance
    pd_pool_queue: float = 4.0
    pd_pool_room: float = 0.50
    pd_idle_running: float = 1.0
    # prefix affinity across replicas: the server's prefix-cache hit rate under
    # prefix_affinity_ratio of the prefix reuse the client sent (a balancer that ignores
    # where a prefix is cached hits it on about 1/N of the ranks), when the client reused at
    # least prefix_min_reuse of its prompt tokens; or the ranks' hit rates prefix_spread apart
    prefix_affinity_ratio: float = 0.50
    prefix_min_reuse: float = 0.20
    prefix_spread: float = 0.30
    # measured scaling efficiency below this share of the plan's; without a plan, below this
    scaling_of_plan: float = 0.80
    scaling_no_plan: float = 0.70
    # expert parallelism: the busiest EP rank's routed tokens over the mean rank's (1 / EPLB
    # balancedness) that is a finding, and a bottleneck whatever the SLOs
    ep_hot_rank: float = 1.25
    ep_hot_rank_bound: float = 2.0
    # pipeline parallelism, on each GPU's busy share (SM active where DCGM profiles): the
    # busiest GPU's over the mean GPU's (one stage slower than the others), when that GPU is
    # busy at least pp_busy_stage; and the mean GPU's under which the stages sit in the bubble
    # while at least one request per stage runs (a GPU at work keeps most SMs busy)
    pp_stage_imbalance: float = 1.3
    pp_busy_stage: float = 0.5
    pp_bubble_busy: float = 0.35

    # --- scheduling layer ---
    # queueing this share of TTFT
    queue_share: float = 0.50
    # KV usage at which a queue waits for memory, not seats (the memory layer's then)
    kv_room: float = 0.90
    # the engine-core thread this busy sets the pace of every step; its loop is busy by
    # design, so only near saturation (higher than the front end's event loop)
    engine_thread_busy: float = 0.95
    # CPU time between graph-replayed forward passes, as a share of the step
    step_cpu_gap: float = 0.30
    # waiting requests growing this fast (per second), or this many waiting: queued for
    # minutes, a bottleneck — where the client measured a request rate, only when serving
    # them at that rate takes this long
    unbounded_slope: float = 0.50
    queued_for_minutes: float = 1000.0
    queued_for_s: float = 60.0

    # --- speculative layer ---
    # draft acceptance below this; at or below not_worth_it verifying costs more than it saves
    low_acceptance: float = 0.50
    not_worth_it: float = 0.30
    # the last draft position accepted less than this share as often as the first
    acceptance_decay: float = 0.30

    # --- a server's log (`infertriage logs`) ---
    # requests running with no token generated for this long: the engine is stuck, and at
    # the full figure as stuck as it gets (vLLM's and SGLang's watchdogs give up near it)
    engine_stuck_s: float = 60.0
    engine_stuck_full_s: float = 300.0
    # no TTFT measured (a log, one scrape): requests waiting is itself the symptom when at
    # least this many wait, in at least this share of the stats lines (one scrape: that one)
    queue_symptom_depth: float = 4.0
    queue_symptom_share: float = 0.5
    # prompts processed again from scratch for this share of the requests started
    cache_miss_share: float = 0.25
    # stats lines (with requests running) that read prompts and generated nothing
    prefill_only_share: float = 0.3
    # requests the client left unfinished (a client time-out below the server's latency)
    client_aborts: float = 3.0
    # a P/D KV transfer at p95 taking this share of the TTFT SLO
    kv_transfer_share: float = 0.5

    def replace(self, **changes: object) -> Thresholds:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# SLO names as users write them → (field, parser). Durations accept units; fractions accept '%'.
def _share(text: str) -> float:
    value = parse_fraction(text)
    if not 0.0 <= value <= 1.0:  # nan fails too
        raise ValueError(text)
    return value


def _time(text: str) -> float:
    value = parse_duration(text)
    if not value > 0:
        raise ValueError(text)
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < math.inf:
        raise ValueError(text)
    return value


_SLO_KEYS = {
    "ttft_p95": ("ttft_p95_s", _time),
    "itl_p95": ("itl_p95_s", _time),
    "error_rate": ("error_rate", _share),
    "gpu_memory_headroom": ("gpu_memory_headroom", _share),
    "sm_active": ("sm_active", _share),
    "dram_active": ("dram_active_decode", _share),
    "tensor_active": ("tensor_active_prefill", _share),
    "alert_ttft_p95": ("alert_ttft_p95_s", _time),
    "throughput": ("min_throughput_tok_s", _rate),
    "profile": ("profile", SloProfile),
}
_EXPECTED: dict[object, str] = {
    _time: "a time above 0, such as 200ms",
    _share: "a share from 0 to 1, such as 5% or 0.05",
    _rate: "tokens/s, 0 or more",
    SloProfile: "interactive or batch",
}


# thresholds renamed since a run.json could store them: the old name → the new one
_RENAMED = {
    "dp_min_excess": "min_excess_requests",
    "eager_decode_token_s": "eager_decode_step_s",  # speculative decoding: a step, not a token
}


def stored_thresholds(items: Mapping[str, object]) -> dict[str, object]:
    """A run's stored thresholds as this version names them: a renamed one under its new
    name, one this version no longer has left out (its rules read the others). A run of an
    earlier version is read, not refused for a field it could not know would change."""
    known = {f.name for f in dataclasses.fields(Thresholds)}
    renamed = {_RENAMED.get(key, key): value for key, value in items.items()}
    return {key: value for key, value in renamed.items() if key in known}


def slo_file_keys() -> dict[str, str]:
    """Each key an SLO file (or `--slo K=V`) takes, and what its value must be: the JSON
    Schema of SLO files is made from this (`schemas.published`)."""
    return {key: _EXPECTED[parse] for key, (_, parse) in _SLO_KEYS.items()}


def _apply(base: Thresholds, items: Mapping[str, object], origin: str) -> Thresholds:
    changes: dict[str, object] = {}
    for key, raw in items.items():
        if key not in _SLO_KEYS:
            known = ", ".join(sorted(_SLO_KEYS))
            raise UserError(f"{origin}: unknown SLO {quoted(key)} (known: {known}).")
        field_name, parse = _SLO_KEYS[key]
        try:
            if not isinstance(raw, str | int | float):  # a list or a mapping: no SLO value
                raise ValueError(raw)
            changes[field_name] = parse(str(raw))
        except (ValueError, UserError) as err:
            raise UserError(
                f"{origin}: SLO {quoted(key)} has an invalid value {quoted(raw)} "
                f"(expected {_EXPECTED[parse]})."
            ) from err
    return base.replace(**changes)


def _read_file(path: Path, spec: str) -> object:
    if not path.exists():
        raise UserError(f"SLO file {spec} {why_missing(path)}.")
    text = read_small_text(path, f"SLO file {spec}")
    if not text.strip():
        raise UserError(f"SLO file {spec} is empty.")
    return load_yaml(text, f"SLO file {spec}")


def load_thresholds(spec: str | None, base: Thresholds | None = None) -> Thresholds:
    """Thresholds from `--slo`: None (defaults), a file path, or `key=value,key=value`."""
    base = base or Thresholds()
    if not spec:
        return base
    path = Path(spec)
    a_path = "=" not in spec and "/" in spec  # not KEY=VALUE: a file, with or without a suffix
    if path.suffix in {".yaml", ".yml", ".json"} or path.exists() or a_path:
        data = _read_file(path, spec)
        if data is None:
            raise UserError(f"SLO file {spec} is empty (only comments).")
        if not isinstance(data, Mapping):
            raise UserError(f"SLO file {spec} must hold a mapping of SLO names to values.")
        return _apply(base, data, spec)
    items: dict[str, object] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise UserError(f"--slo {spec!r}: {part!r} is not KEY=VALUE.")
        items[key.strip()] = value.strip()
    return _apply(base, items, "--slo")
