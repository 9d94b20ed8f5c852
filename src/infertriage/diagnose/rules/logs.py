"""diagnose, level 3: rules over what only a server's own log says (`infertriage logs`).

A stuck engine: requests running, no token generated, for minutes. Metrics
sampled over a load run rarely catch it; the log's stats lines do. Prompts
processed again from scratch (llama.cpp's cache that could not be reused) and
contexts that shifted; collectives between ranks that timed out (torch's NCCL
watchdog); KV transfers between prefill and decode instances that are slow or fail.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.schemas import Finding, Layer, Thresholds


@rule("scheduling.engine_stuck", Layer.SCHEDULING, ("log.engine_stuck_s",))
def engine_stuck(ev: Evidence, t: Thresholds) -> Finding | None:
    stuck = ev.get("log.engine_stuck_s") or 0.0
    if stuck < t.engine_stuck_s:
        return None
    return make_finding(
        "scheduling.engine_stuck",
        Layer.SCHEDULING,
        bottleneck=True,
        severity=max(0.5, severity_above(stuck, t.engine_stuck_s, t.engine_stuck_full_s)),
        explains=1.0,
        title=f"the engine generated no token for {stuck:.0f} s while requests were running",
        evidence=ev,
        used=(("log.engine_stuck_s", t.engine_stuck_s), ("queue.running_max", None)),
        explanation=(
            "The engine loop stopped making progress with requests admitted: a hung "
            "collective (NCCL) between ranks, a dead worker process, or a deadlock in the "
            "scheduler. Every running and waiting request waits until it is restarted."
        ),
        next_steps=(
            "dump the engine's stacks while it hangs: `py-spy dump --pid ENGINE_PID` "
            "(every rank); with tensor parallelism rerun with `NCCL_DEBUG=INFO`",
            "look just before the stall in the log for a worker's traceback or an XID error "
            "(`dmesg`)",
            "restart on it: a liveness probe that fails when `vllm:num_requests_running` > 0 "
            "and `vllm:generation_tokens_total` has not grown for a minute",
        ),
    )


@rule("memory.prompt_reprocessed", Layer.MEMORY, ("log.cache_misses",))
def prompt_reprocessed(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prompts processed again from scratch although their prefix was cached.

    llama.cpp with a sliding-window or hybrid model keeps no checkpoint to resume from
    ("forcing full prompt re-processing due to lack of cache data"); every turn of a chat
    then pays its whole prompt again. A bottleneck when it is most requests' fate."""
    misses = ev.get("log.cache_misses") or 0.0
    if misses < 1:
        return None
    share = ev.get("log.cache_miss_share")
    tokens = ev.get("log.cache_miss_tokens")
    of = "" if share is None else f" ({share:.0%} of the requests started)"
    return make_finding(
        "memory.prompt_reprocessed",
        Layer.MEMORY,
        bottleneck=share is not None and share >= t.cache_miss_share,
        severity=max(0.3, share or 0.0),
        explains=0.8 if share is not None and share >= t.cache_miss_share else 0.4,
        title=f"{misses:.0f} prompt(s) processed again from scratch{of}"
        + (f", {tokens:,.0f} tokens recomputed" if tokens else ""),
        evidence=ev,
        used=(
            ("log.cache_misses", 0.0),
            ("log.cache_miss_share", t.cache_miss_share),
            ("log.cache_miss_tokens", None),
        ),
        explanation=(
            "The cached prefix of a request could not be reused, so its whole prompt was "
            "prefilled again: TTFT grows with the conversation instead of with the new turn."
        ),
        next_steps=(
            "llama.cpp with a sliding-window or hybrid model: keep context checkpoints "
            "(`--ctx-checkpoints N`, `--swa-full` for SWA models) so a turn resumes from its "
            "prefix",
            "route each conversation to the same slot / replica (`--slot-prompt-similarity`, a "
            "prefix-aware balancer) and leave its prefix in the cache (`--cache-reuse N`)",
        ),
    )


@rule("memory.context_shift", Layer.MEMORY, ("log.context_shifts",))
def context_shift(ev: Evidence, t: Thresholds) -> Finding | None:
    """The context of a slot filled up: the engine dropped tokens to go on generating."""
    shifts = ev.get("log.context_shifts") or 0.0
    if shifts < 1:
        return None
    return make_finding(
        "memory.context_shift",
        Layer.MEMORY,
        bottleneck=True,
        severity=min(1.0, 0.4 + 0.1 * shifts),
        explains=0.6,
        title=f"the context filled {shifts:.0f} time(s): tokens dropped to go on (context shift)",
        evidence=ev,
        used=(("log.context_shifts", 0.0), ("config.max_model_len", None)),
        explanation=(
            "A request outgrew its slot's context (the total context divided among the "
            "slots): the engine discarded part of it and recomputed, so the answer slows and "
            "loses what was dropped."
        ),
        next_steps=(
            "give each slot a longer context: a larger `-c` / `--ctx-size`, or fewer slots "
            "(`-np`), since llama.cpp divides the context among them",
            "cap the output (`max_tokens`) below the slot's context, or turn shifting off "
            "(`--no-context-shift`) to fail such requests instead",
        ),
    )


@rule("parallelism.collective_timeout", Layer.PARALLELISM, ("log.collective_timeouts",))
def collective_timeout(ev: Evidence, t: Thresholds) -> Finding | None:
    """A collective between ranks (NCCL all-reduce, all-gather) timed out: a rank hung."""
    count = ev.get("log.collective_timeouts") or 0.0
    if count < 1:
        return None
    return make_finding(
        "parallelism.collective_timeout",
        Layer.PARALLELISM,
        bottleneck=True,
        severity=1.0,
        explains=1.0,
        title=f"{count:.0f} collective operation(s) between GPU ranks timed out or failed",
        evidence=ev,
        used=(("log.collective_timeouts", 0.0), ("config.tensor_parallel", None)),
        explanation=(
            "One rank stopped reaching the collective the others wait in: a hung or crashed "
            "worker, a broken NVLink/PCIe peer path, or ranks that diverged. Every request on "
            "the engine waits until the watchdog kills it."
        ),
        next_steps=(
            "rerun with `NCCL_DEBUG=INFO` (and `TORCH_NCCL_TRACE_BUFFER_SIZE`) and read the "
            "first rank that stopped; check `nvidia-smi topo -m` and `dmesg` for Xid errors",
            "test the links alone: `all_reduce_perf` (nccl-tests) on the same GPUs; with PCIe "
            "only, try `NCCL_P2P_DISABLE=1`",
        ),
    )


@rule("parallelism.kv_transfer", Layer.PARALLELISM, ("pd.kv_transfer_p95_s",))
def kv_transfer(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prefill/decode disaggregation: moving a request's KV cache takes much of the TTFT."""
    p95 = ev.get("pd.kv_transfer_p95_s") or 0.0
    failed = ev.get("pd.kv_transfer_failures") or 0.0
    budget = t.kv_transfer_share * t.ttft_p95_s
    if p95 < budget and failed < 1:
        return None
    failures = f", {failed:.0f} failed" if failed else ""
    return make_finding(
        "parallelism.kv_transfer",
        Layer.PARALLELISM,
        bottleneck=True,
        severity=max(severity_above(p95, budget, 4 * budget), 0.8 if failed else 0.0),
        explains=0.8,
        title=f"KV transfers between prefill and decode take {p95 * 1e3:.0f} ms at p95{failures}",
        evidence=ev,
        used=(("pd.kv_transfer_p95_s", budget), ("pd.kv_transfer_failures", 0.0)),
        explanation=(
            "With prefill and decode on separate instances every request's KV cache crosses "
            "the link before its first decode step: a slow or failing link is paid in TTFT."
        ),
        next_steps=(
            "check the transfer backend uses RDMA/NVLink, not TCP (NIXL/Mooncake: the UCX "
            "transports it chose; `UCX_TLS`), and the link's bandwidth with `ib_write_bw`",
            "keep short prompts on the decode instance (a prefill-length threshold) so only "
            "long prompts pay the transfer",
        ),
    )
