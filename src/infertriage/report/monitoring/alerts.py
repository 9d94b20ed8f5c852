"""report, level 4: the alert rules — one per way an inference service goes wrong.

Takes the recording rules made, dcgm-exporter's `Exporter`, the engine's,
`AlertLimits` and `Timing`; gives the `Alert`s (TTFT and ITL p95 over their
limits, failed requests over 0.1 %, KV cache full, the queue growing,
preemptions, the GPU busy while its SMs idle, GPU memory or KV cache
creeping up, throughput below the baseline, replicas out of balance, a
server restart) and the `LeftOut` ones the engine cannot feed. Each names
its layer and the `infertriage` command to run next; the renderer puts both
into its runbook annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from infertriage.report.monitoring.model import (
    Alert,
    AlertLimits,
    LeftOut,
    Recorded,
    Timing,
)
from infertriage.report.monitoring.promql import Exporter, duration, why_missing
from infertriage.schemas import Layer

__all__ = ["alert_rules"]

_MIN = 60.0
# $URL and $JOB: the runbook annotation puts the replica's address (its `instance` label)
# and its job there; URL and PROMETHEUS are the user's to fill in
_DIAGNOSE = "infertriage diagnose --url $URL"
_FLEET = "infertriage diagnose --url URL --prometheus PROMETHEUS --selector 'job=\"$JOB\"'"
_DIAGNOSE_GPU = "infertriage diagnose --url URL --dcgm-url $URL/metrics"
_R = Recorded


def _latency(limits: AlertLimits, timing: Timing) -> list[Alert]:
    return [
        Alert(
            "InferTriageTTFTHigh",
            Layer.SCHEDULING,
            _R.TTFT_P95,
            ">",
            limits.ttft_p95_s,
            5 * _MIN,
            "TTFT p95 above its limit: requests wait before their first token",
            _FLEET,
            severity="critical",
            unit="s",
        ),
        Alert(
            "InferTriageITLHigh",
            Layer.SCHEDULING,
            _R.ITL_P95,
            ">",
            limits.itl_p95_s,
            5 * _MIN,
            "ITL p95 above its limit: streams stutter between tokens",
            _FLEET,
            unit="s",
        ),
    ]


def _service(limits: AlertLimits, timing: Timing) -> list[Alert]:
    return [
        Alert(
            "InferTriageErrorRate",
            Layer.APPLICATION,
            _R.ERROR_RATIO,
            ">",
            limits.error_rate,
            5 * _MIN,
            "failed requests above their limit",
            "infertriage logs SERVER.LOG; " + _FLEET,
            severity="critical",
            unit="fraction",
        ),
        Alert(
            "InferTriageKVCacheFull",
            Layer.MEMORY,
            _R.KV_USAGE,
            ">",
            limits.kv_full,
            10 * _MIN,
            "KV cache full: requests queue for memory and get preempted",
            "infertriage plan --model MODEL --gpu GPU --max-model-len L --concurrency C; "
            + _DIAGNOSE,
            severity="critical",
            unit="fraction",
        ),
    ]


def _pressure(limits: AlertLimits, timing: Timing) -> list[Alert]:
    return [
        Alert(
            "InferTriageQueueGrowing",
            Layer.SCHEDULING,
            f"deriv({_R.WAITING}[{duration(2 * timing.rate_window_s)}])",
            ">",
            limits.queue_growth_per_s,
            10 * _MIN,
            "waiting requests keep growing: arrivals outpace the server",
            "infertriage bench --url $URL --sweep; " + _DIAGNOSE,
            # a queue that grows never empties over the window: an async engine holds each
            # arrival for a step, so a healthy server's waiting gauge flickers 0 → 1 → 0
            guard=(
                f"and on (job, instance) min_over_time({_R.WAITING}"
                f"[{duration(2 * timing.rate_window_s)}]) > 0"
            ),
            unit="requests/s",
        ),
        Alert(
            "InferTriagePreemptions",
            Layer.MEMORY,
            _R.PREEMPTIONS,
            ">",
            limits.preemptions_per_s,
            10 * _MIN,
            "requests preempted: the KV cache cannot hold the running batch",
            _DIAGNOSE,
            unit="preemptions/s",
        ),
        Alert(
            "InferTriageKVLeak",
            Layer.MEMORY,
            _R.KV_USAGE,
            ">",
            limits.kv_leak_residue,
            15 * _MIN,
            "KV cache held with no request running: blocks leak",
            "infertriage diagnose --url $URL --duration 60",
            guard=f"and on (job, instance) {_R.RUNNING} == 0",
            unit="fraction",
        ),
    ]


def _fleet(limits: AlertLimits, timing: Timing) -> list[Alert]:
    # each replica's requests in flight over the window; a fleet of replicas that each hold a
    # request or less is mostly idle, and its ratio a few arrivals' chance (as diagnose reads it)
    window = duration(timing.rate_window_s)
    running = f"avg_over_time({_R.RUNNING}[{window}])"
    # a replica with no waiting series waits for nothing (the sum of vectors keeps only the
    # label sets both have)
    load = f"{running} + (avg_over_time({_R.WAITING}[{window}]) or {running} * 0)"
    made = [
        Alert(
            "InferTriageReplicaImbalance",
            Layer.APPLICATION,
            f"max by (job) ({_R.GENERATION_TOKENS}) / avg by (job) ({_R.GENERATION_TOKENS})",
            ">",
            limits.replica_imbalance,
            15 * _MIN,
            "one replica generates far more than the mean: the load balancer is uneven",
            "infertriage metrics --prometheus PROMETHEUS --selector 'job=\"$JOB\"'",
            guard=(
                f"and on (job) count by (job) ({_R.GENERATION_TOKENS}) > 1 "
                f"and on (job) (max by (job) ({load}) - avg by (job) ({load})) "
                f">= {limits.min_excess_requests:.6g}"
            ),
            unit="× the mean",
        )
    ]
    if limits.min_throughput_tok_s > 0:
        made.append(
            Alert(
                "InferTriageThroughputBelowBaseline",
                Layer.SCHEDULING,
                _R.GENERATION_TOKENS,
                "<",
                limits.min_throughput_tok_s,
                15 * _MIN,
                f"tokens/s below the baseline's floor ({limits.origin}) with requests running",
                "infertriage compare BASELINE RUN; " + _DIAGNOSE,
                guard=f"and on (job, instance) {_R.RUNNING} > 0",
                unit="tokens/s",
            )
        )
    return made


def _gpu(gpu: Exporter, limits: AlertLimits, timing: Timing) -> list[Alert]:
    (sm,) = gpu.sources("gpu.sm_active")
    return [
        Alert(
            "InferTriageGPUBusySMsIdle",
            Layer.HARDWARE,
            _R.GPU_UTIL,
            ">",
            limits.gpu_busy,
            15 * _MIN,
            f"GPU util above {limits.gpu_busy:.0%} while SM active stays below "
            f"{limits.sm_idle:.0%}: 'util' counts the time a kernel ran, not the SMs at work",
            "infertriage diagnose --url URL --dcgm-url $URL/metrics --profile 10",
            guard=f"and on ({gpu.by}) max by ({gpu.by}) ({gpu.selector(sm)}) < {limits.sm_idle:g}",
            unit="fraction",
        ),
        Alert(
            "InferTriageGPUMemoryCreep",
            Layer.MEMORY,
            f"deriv({_R.GPU_FB_USED}[{duration(6 * timing.rate_window_s)}])",
            ">",
            limits.fb_growth_bytes_per_s,
            30 * _MIN,
            "GPU memory keeps growing: a leak outside the KV cache's fixed pool",
            _DIAGNOSE_GPU,
            unit="bytes/s",
        ),
    ]


def _restart(engine: Exporter, timing: Timing) -> Alert | None:
    """The process start time changed, or else a counter went back to zero (a server that
    exports no start time, or whose scrape lacks it)."""
    window = duration(3 * timing.rate_window_s)
    started = engine.changes("proc.start_time_s", window)
    # process_* names are every exporter's: only the replicas that export the engine's own
    # queue count (not Prometheus restarting, nor a node exporter)
    engine_own = engine.gauge("queue.waiting") or engine.gauge("queue.running")
    if started is not None and engine_own is not None:
        started = f"({started}) and on (job, instance) ({engine_own})"
    parts = [
        started,
        engine.resets("tokens.generation", window),
        engine.resets("requests.finished", window),
    ]
    found = [f"({p})" for p in parts if p is not None]
    if not found:
        return None
    return Alert(
        "InferTriageServerRestart",
        Layer.APPLICATION,
        " or ".join(found),
        ">",
        0.0,
        0.0,
        "the server restarted (its start time changed or its counters went back to zero): "
        "an OOM, a crash or a deploy",
        "infertriage logs SERVER.LOG",
        unit="restarts",
    )


def alert_rules(
    unrecorded: Mapping[str, str],
    engine: Exporter,
    gpu: Exporter,
    limits: AlertLimits,
    timing: Timing,
) -> tuple[list[Alert], list[LeftOut]]:
    """The alerts whose recorded series exist, and those left out with the reason;
    `unrecorded` maps each recorded name the engine cannot feed to why."""
    wanted = [
        *_latency(limits, timing),
        *_service(limits, timing),
        *_pressure(limits, timing),
        *_fleet(limits, timing),
        *_gpu(gpu, limits, timing),
    ]
    made: list[Alert] = []
    left: list[LeftOut] = []
    for alert in wanted:
        missing = [name for name in unrecorded if name in alert.signal + alert.guard]
        if missing:
            left.append(LeftOut(alert.name, f"{unrecorded[missing[0]]} (no {missing[0]})"))
        else:
            made.append(replace(alert, for_s=alert.for_s * timing.for_scale))
    restart = _restart(engine, timing)
    if restart is None:
        left.append(LeftOut("InferTriageServerRestart", why_missing(engine, "proc.start_time_s")))
    else:
        made.append(restart)
    return made, left
