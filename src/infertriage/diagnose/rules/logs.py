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
from infertriage.diagnose.symptom import current, flag, slo_missed
from infertriage.engines import Knob
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
    then pays its whole prompt again. A bottleneck when it is many requests' fate, or when
    the excerpt holds no request start to compare with (with less confidence)."""
    misses = ev.get("log.cache_misses") or 0.0
    if misses < 1:
        return None
    share = ev.get("log.cache_miss_share")
    tokens = ev.get("log.cache_miss_tokens")
    # an excerpt without the requests around it: the misses are all it shows, said with less
    # confidence
    of = (
        " (no request start in the excerpt to compare with)"
        if share is None
        else f" ({share:.0%} of the requests started)"
    )
    often = share is None or share >= t.cache_miss_share
    return make_finding(
        "memory.prompt_reprocessed",
        Layer.MEMORY,
        bottleneck=often,
        severity=max(0.3, share or 0.5),
        explains=0.5 if share is None else 0.8 if often else 0.4,
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


@rule("parallelism.kv_transfer", Layer.PARALLELISM, ("pd.kv_transfer_failures",))
def kv_transfer(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prefill/decode disaggregation: moving a request's KV cache fails, or takes much of the
    TTFT (its time is known where the connector logs it)."""
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
        title=(
            f"KV transfers between prefill and decode take {p95 * 1e3:.0f} ms at p95{failures}"
            if ev.has("pd.kv_transfer_p95_s")
            else f"{failed:.0f} KV transfer(s) between prefill and decode failed"
        ),
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


@rule("memory.preempted", Layer.MEMORY, ("preemptions.total",))
def preempted(ev: Evidence, t: Thresholds) -> Finding | None:
    """Requests preempted (vLLM) or retracted (SGLang) for KV space, with no usage figure to
    show the full cache (a log excerpt of warnings, a scrape): the preemptions say it."""
    count = ev.get("preemptions.total") or 0.0
    # with the KV use known, `memory.kv_pressure` judges it (a full cache, or not)
    if count < 1 or ev.has("kv.usage_max"):
        return None
    return make_finding(
        "memory.preempted",
        Layer.MEMORY,
        bottleneck=True,  # a preempted request is computed twice, whatever the SLOs say
        severity=min(1.0, 0.5 + count / 200.0),
        explains=0.8,
        title=f"{count:.0f} running request(s) preempted for lack of KV cache space",
        evidence=ev,
        used=(("preemptions.total", 0.0), ("kv.usage_max", t.kv_full)),
        explanation=(
            "The KV cache could not hold every running sequence's next tokens: the engine "
            "evicted some and recomputes them later, wasting their prefill and decode so far."
        ),
        next_steps=(
            f"raise `{flag(ev, Knob.MEMORY_FRACTION)}`"
            + current(ev, "config.gpu_memory_utilization")
            + ", or store the KV cache in FP8 (`--kv-cache-dtype fp8`)",
            f"lower `{flag(ev, Knob.MAX_SEATS)}`"
            + current(ev, "config.max_num_seqs")
            + " so requests queue instead of being preempted",
            "add GPUs (tensor parallelism) for more KV memory; size it with `infertriage plan`",
        ),
    )


@rule("memory.kv_below_context", Layer.MEMORY, ("log.kv_cache_short",))
def kv_below_context(ev: Evidence, t: Thresholds) -> Finding | None:
    """The KV cache holds less than one request of the longest context the server allows
    (the engine said so at start-up, or its stated sizes show it)."""
    if (ev.get("log.kv_cache_short") or 0.0) < 1:
        return None
    length, tokens = ev.get("config.max_model_len"), ev.get("config.kv_cache_tokens")
    held = (
        "no KV cache at all"
        if tokens is None and length is None
        else (f"{tokens:,.0f} tokens" if tokens is not None else "fewer tokens")
    )
    than = "" if length is None else f" — less than one request of max_model_len {length:,.0f}"
    return make_finding(
        "memory.kv_below_context",
        Layer.MEMORY,
        bottleneck=True,
        severity=1.0,
        explains=0.9,
        title=f"the KV cache holds {held}{than}",
        evidence=ev,
        used=(
            ("log.kv_cache_short", 0.0),
            ("config.kv_cache_tokens", length),
            ("config.max_model_len", None),
        ),
        explanation=(
            "After the weights and the activation reserve, the memory left for the KV cache "
            "cannot hold one request as long as the server accepts: the engine refuses to start, "
            "or such a request waits and preempts forever."
        ),
        next_steps=(
            f"lower `{flag(ev, Knob.MAX_CONTEXT)}`"
            + current(ev, "config.max_model_len", "{:,.0f}"),
            f"raise `{flag(ev, Knob.MEMORY_FRACTION)}`"
            + current(ev, "config.gpu_memory_utilization")
            + "; check no other process holds the GPU's memory (`nvidia-smi`); with vLLM, "
            "chunked prefill shrinks the activation reserve",
            "quantise the KV cache (`--kv-cache-dtype fp8`) or add GPUs (tensor parallelism)",
        ),
    )


@rule("scheduling.prompt_over_limit", Layer.SCHEDULING, ("log.prompts_over_limit",))
def prompt_over_limit(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prompts refused by the scheduler: longer than the tokens one step may schedule."""
    count = ev.get("log.prompts_over_limit") or 0.0
    if count < 1:
        return None
    limit = ev.get("log.prompt_limit_tokens")
    at = "" if limit is None else f" of {limit:,.0f} tokens"
    return make_finding(
        "scheduling.prompt_over_limit",
        Layer.SCHEDULING,
        bottleneck=True,
        severity=1.0,
        explains=0.9,
        title=f"{count:.0f} prompt(s) refused by the scheduler over its limit{at}",
        evidence=ev,
        used=(("log.prompts_over_limit", 0.0), ("log.prompt_limit_tokens", None)),
        explanation=(
            "Without chunked prefill a prompt must fit in one step's token budget: the "
            "scheduler's limit is the lesser of the context length and "
            "`max_num_batched_tokens`, and longer prompts are dropped, not queued."
        ),
        next_steps=(
            f"raise `{flag(ev, Knob.TOKEN_BUDGET)}` to at least the longest prompt"
            + current(ev, "config.max_num_batched_tokens", "{:,.0f}"),
            "enable chunked prefill (`--enable-chunked-prefill`) so long prompts are split",
        ),
    )


@rule("scheduling.prefill_blocks_decode", Layer.SCHEDULING, ("log.prefill_only_share",))
def prefill_blocks_decode(ev: Evidence, t: Thresholds) -> Finding | None:
    """Steps that only prefill while requests run: every running decode pauses meanwhile."""
    share = ev.get("log.prefill_only_share") or 0.0
    if share < t.prefill_only_share:
        return None
    return make_finding(
        "scheduling.prefill_blocks_decode",
        Layer.SCHEDULING,
        bottleneck=True,
        severity=severity_above(share, t.prefill_only_share, 0.8),
        explains=0.8,
        title=f"in {share:.0%} of the stats lines with requests running, the engine read "
        "prompts and generated no token",
        evidence=ev,
        used=(("log.prefill_only_share", t.prefill_only_share), ("queue.waiting_max", None)),
        explanation=(
            "The scheduler runs prefill-only steps while new prompts wait (vLLM V0's default "
            "scheduler never mixes prefill and decode): the running requests' decode stops "
            "each time, so their inter-token latency spikes whenever prompts arrive."
        ),
        next_steps=(
            "enable chunked prefill (`--enable-chunked-prefill`; the default in vLLM V1) so "
            "decodes run first and prompts fill the rest of each step",
            f"cap a step's prefill: `{flag(ev, Knob.TOKEN_BUDGET)}`"
            + current(ev, "config.max_num_batched_tokens", "{:,.0f}"),
        ),
    )


@rule("application.client_aborts", Layer.APPLICATION, ("log.aborted",))
def client_aborts(ev: Evidence, t: Thresholds) -> Finding | None:
    """Clients that left before their request finished: their time-out is below the latency.

    Users who press stop abort a request now and then; a time-out aborts many at once (the
    same deadline reached by a batch of requests): a bottleneck when `client_aborts` or more
    end in the same second, or an SLO is missed; a warning otherwise."""
    aborted = ev.get("log.aborted") or 0.0
    burst = ev.get("log.aborted_burst") or 0.0
    if aborted < t.client_aborts:
        return None
    return make_finding(
        "application.client_aborts",
        Layer.APPLICATION,
        bottleneck=burst >= t.client_aborts or slo_missed(ev, t),
        severity=severity_above(aborted, t.client_aborts, 10 * t.client_aborts),
        explains=0.6,
        title=f"{aborted:.0f} requests aborted: the client closed them before they finished"
        + (f", {burst:.0f} in one second" if burst > 1 else ""),
        evidence=ev,
        used=(("log.aborted", t.client_aborts), ("log.aborted_burst", t.client_aborts)),
        explanation=(
            "The server logs an abort when the client closes the stream early: a client or "
            "gateway time-out shorter than the requests take under this load, or users who "
            "gave up. The work done for them is wasted and the client sees failures."
        ),
        next_steps=(
            "raise the client's / gateway's request time-out above the end-to-end latency at "
            "this load (the longest outputs set it)",
            "measure the latency the clients see: `infertriage bench --url URL` at the same "
            "concurrency",
        ),
    )
