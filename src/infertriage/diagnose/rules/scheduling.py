"""diagnose, level 3: scheduling-layer rules — queueing, the engine loop's CPU, admission."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.rules.memory import kv_blocks_short
from infertriage.diagnose.symptom import current, engine_flag, flag, slo_missed, ttft_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.SCHEDULING
_QUEUE_SHARE = 0.5
_KV_ROOM = 0.9
_BUSY_THREAD = 0.95
_STEP_GAP = 0.3
_UNBOUNDED_SLOPE = 0.5  # waiting requests per second
_QUEUED_FOR_MINUTES = 1000
# an engine not known: its seat flag under other engines' names too
_OTHER_SEAT_FLAGS = " (llama.cpp: `-np`; SGLang: `--max-running-requests`)"


@rule(
    "scheduling.queue_dominates_ttft",
    _L,
    ("queue.waiting_max", "queue.running_max"),
)
def queue_dominates_ttft(ev: Evidence, t: Thresholds) -> Finding | None:
    """Requests wait for a seat, not for memory: by queue time, or by a full batch with room.

    Engines without latency histograms or KV usage (llama.cpp) are judged by the seats
    alone: every slot taken while requests wait.
    """
    ttft = ev.get("server.ttft_mean_s") or 0.0
    usage = ev.get("kv.usage_max") or 0.0
    waiting, running = ev.get("queue.waiting_max") or 0.0, ev.get("queue.running_max") or 0.0
    seats = ev.get("config.max_num_seqs")
    queue = ev.get("server.queue_time_mean_s")
    share = queue / ttft if queue is not None and ttft > 0 else 0.0
    seats_full = seats is not None and running >= seats and waiting > 0
    # Seats left empty: the queue waits for the token budget, i.e. the GPU's prefill time
    # (an L4 prefilling 2k-token prompts), not for a cap a scheduling knob would lift.
    seats_free = seats is not None and running < seats
    if usage >= _KV_ROOM or kv_blocks_short(ev) is not None:
        return None  # waiting for memory: the memory layer's finding
    if share < _QUEUE_SHARE and not seats_full:
        return None
    share_text = (
        f"queueing is {share:.0%} of TTFT"
        if share >= _QUEUE_SHARE
        else (f"{waiting:.0f} requests wait while all {running:.0f} seats are taken")
    )
    if seats_free:
        share_text += f", {running:.0f} of {seats:.0f} seats used"
    return make_finding(
        "scheduling.queue_dominates_ttft",
        _L,
        bottleneck=ttft_missed(ev, t) and not seats_free,
        severity=max(severity_above(share, _QUEUE_SHARE, 0.95), 0.6 if seats_full else 0.0),
        explains=max(share, 0.7 if seats_full else 0.0),
        title=share_text
        + (f" while the KV cache has room ({usage:.0%} used)" if ev.has("kv.usage_max") else ""),
        evidence=ev,
        used=(
            ("server.queue_time_mean_s", _QUEUE_SHARE * ttft),
            ("queue.waiting_max", 0.0),
            ("config.max_num_seqs", None),
            ("kv.usage_max", _KV_ROOM),
        ),
        explanation=(
            "Requests wait with batch seats free: each step's token budget goes to other "
            "prompts' prefill, so the GPU's prefill speed sets the wait."
            if seats_free
            else "Requests wait for a batch slot, not for memory: the batch is capped below "
            "what the KV cache could hold."
        ),
        next_steps=(
            f"raise `{flag(ev, Knob.MAX_SEATS)}`"
            + current(ev, "config.max_num_seqs")
            + ("" if engine_flag(ev, Knob.MAX_SEATS) else _OTHER_SEAT_FLAGS),
            f"raise the token budget `{flag(ev, Knob.TOKEN_BUDGET)}`",
            "add replicas if the GPU is already saturated",
        ),
    )


@rule("scheduling.engine_loop_cpu", _L, ("proc.engine_thread_cpu",))
def engine_loop_cpu(ev: Evidence, t: Thresholds) -> Finding | None:
    busy = ev.get("proc.engine_thread_cpu") or 0.0
    if busy < _BUSY_THREAD:
        return None
    return make_finding(
        "scheduling.engine_loop_cpu",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(busy, _BUSY_THREAD, 1.0),
        explains=0.6,
        title=f"the engine-core thread is {busy:.0%} busy on the CPU",
        evidence=ev,
        used=(("proc.engine_thread_cpu", _BUSY_THREAD),),
        explanation="Scheduling and bookkeeping in one Python thread set the pace of every step.",
        next_steps=(
            f"enable async scheduling; reduce `{flag(ev, Knob.MAX_SEATS)}`; use a faster host CPU",
        ),
    )


@rule("scheduling.step_cpu_gap", _L, ("trace.step_cpu_gap_fraction",))
def step_cpu_gap(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.step_cpu_gap_fraction") or 0.0
    if share < _STEP_GAP:
        return None
    return make_finding(
        "scheduling.step_cpu_gap",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, _STEP_GAP, 0.7),
        explains=share,
        title=f"{share:.0%} of each step is CPU time between forward passes",
        evidence=ev,
        used=(("trace.step_cpu_gap_fraction", _STEP_GAP),),
        explanation="The scheduler's own work is comparable with the forward pass it prepares.",
        next_steps=("enable async scheduling; lower the per-sequence scheduling cost",),
    )


@rule("scheduling.unbounded_queue", _L, ("queue.waiting_max",))
def unbounded_queue(ev: Evidence, t: Thresholds) -> Finding | None:
    slope = ev.get("queue.waiting_slope") or 0.0  # absent from one scrape: depth alone then
    waiting = ev.get("queue.waiting_max") or 0.0
    if slope < _UNBOUNDED_SLOPE and waiting < _QUEUED_FOR_MINUTES:
        return None
    return make_finding(
        "scheduling.unbounded_queue",
        _L,
        bottleneck=waiting >= _QUEUED_FOR_MINUTES,
        severity=severity_above(waiting, 10, _QUEUED_FOR_MINUTES),
        explains=0.4 if waiting < _QUEUED_FOR_MINUTES else 0.9,
        title=f"waiting requests grow without bound (up to {waiting:.0f}, +{slope:.1f}/s)",
        evidence=ev,
        used=(("queue.waiting_slope", _UNBOUNDED_SLOPE), ("queue.waiting_max", 0.0)),
        explanation=(
            "Arrivals exceed what the server finishes; with no admission limit requests queue "
            "for minutes instead of being rejected."
        ),
        next_steps=(
            "put an admission limit in front (gateway concurrency limit, 429 above a queue depth)",
            "add replicas; size them with `infertriage plan`",
        ),
    )
