"""diagnose, level 3: parallelism-layer rules of disaggregated and data-parallel serving — a
KV transfer that sets the first token's pace, a prefill:decode ratio that starves one pool,
and prefix-cache hits lost because requests reach a replica that does not hold their prefix.

They read the signals of `analyze.signals.disagg` (`pd.*`, role by role) and the per-rank
prefix-cache figures of `analyze.signals.ranks` (`dp.prefix_hit_rate*`), and the client's
prefix reuse (`workload.prefix_reuse`) where the workload measured it.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.rules.memory import few_prompts
from infertriage.diagnose.symptom import current, flag, itl_missed, ttft_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.PARALLELISM
_GB = 1e9


def _transfer_share(ev: Evidence) -> tuple[float | None, str]:
    """The mean KV transfer's share of TTFT, and what it was held against: the client's
    median TTFT where a client ran, else the servers' (both roles' TTFT added)."""
    mean = ev.get("pd.transfer_time_mean_s")
    client = ev.get("client.ttft_p50_s")
    if mean is not None and client:
        return min(1.0, mean / client), "of the clients' median TTFT"
    return ev.get("pd.transfer_ttft_share"), "of the servers' TTFT (prefill + decode)"


def _link_text(ev: Evidence) -> str:
    rate = ev.get("pd.transfer_bytes_per_s")
    size = ev.get("pd.transfer_bytes_mean")
    parts = []
    if size is not None:
        parts.append(f"{size / 2**20:.0f} MiB a transfer")
    if rate is not None:
        parts.append(f"{rate / _GB:.2f} GB/s achieved ({rate * 8 / _GB:.1f} Gb/s)")
    return ", ".join(parts)


@rule("parallelism.kv_transfer_bound", _L, ("pd.transfer_time_mean_s",))
def kv_transfer_bound(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prefill/decode disaggregation whose KV transfer sets the first token's pace.

    A finding when the mean transfer takes `pd_transfer_share` of TTFT, when the link
    achieves under `pd_slow_link_bytes_s` while the transfers cost `pd_link_share` of TTFT,
    when `pd_transfer_failures` of the transfers fail, or when `pd_transfer_queue` requests
    per decode instance wait for one. A bottleneck at `pd_transfer_bound` of TTFT, with
    failures or a transfer queue, or with the TTFT SLO missed. Silent where the transfers
    cost little and nothing fails: a healthy P/D deployment's link.
    """
    mean = ev.get("pd.transfer_time_mean_s") or 0.0
    share, against = _transfer_share(ev)
    rate = ev.get("pd.transfer_bytes_per_s")
    failed = ev.get("pd.transfer_failure_share")
    if failed is None:  # no transfer count: any failure is one in too many
        failed = 1.0 if (ev.get("pd.transfer_failures") or 0.0) >= 1 else 0.0
    decodes = max(ev.get("pd.decode_instances") or 1.0, 1.0)
    queued = (ev.get("pd.transfer_queue") or 0.0) / decodes
    costly = share is not None and share >= t.pd_transfer_share
    slow = (
        rate is not None
        and rate < t.pd_slow_link_bytes_s
        and share is not None
        and share >= t.pd_link_share
    )
    failing = failed >= t.pd_transfer_failures
    backed_up = queued >= t.pd_transfer_queue
    if not (costly or slow or failing or backed_up):
        return None
    said = []
    if share is not None:
        part = "as long as all" if share >= 1.0 else f"{share:.0%}"
        said.append(f"the mean KV transfer ({mean * 1e3:.0f} ms) is {part} {against}")
    if _link_text(ev):
        said.append(_link_text(ev))
    if failing:
        said.append(f"{ev.get('pd.transfer_failures') or 0:.0f} transfers failed")
    if backed_up:
        said.append(f"{queued:.0f} requests per decode instance wait for a transfer")
    worst = max(
        severity_above(share or 0.0, t.pd_transfer_share, 0.9),
        severity_above(failed, t.pd_transfer_failures, 0.2),
        severity_above(queued, t.pd_transfer_queue, 4 * t.pd_transfer_queue),
        severity_below(rate, t.pd_slow_link_bytes_s, 0.0) if slow and rate is not None else 0.0,
    )
    head = (
        "the KV transfer from prefill to decode sets the first token's pace: "
        if costly or slow
        else "KV transfers between prefill and decode fail or queue: "
    )
    return make_finding(
        "parallelism.kv_transfer_bound",
        _L,
        bottleneck=(
            (share or 0.0) >= t.pd_transfer_bound
            or failing
            or backed_up
            or (ttft_missed(ev, t) and (costly or slow))
        ),
        severity=worst,
        explains=min(1.0, max(share or 0.0, 0.5 if failing or backed_up else 0.0)),
        title=head + "; ".join(said),
        evidence=ev,
        used=(
            ("pd.transfer_time_mean_s", None),
            ("pd.transfer_time_p90_s", None),
            ("pd.transfer_ttft_share", t.pd_transfer_share),
            ("client.ttft_p50_s", None),
            ("pd.transfer_bytes_per_s", t.pd_slow_link_bytes_s),
            ("pd.transfer_bytes_mean", None),
            ("pd.transfer_failure_share", t.pd_transfer_failures),
            ("pd.transfer_queue", t.pd_transfer_queue),
        ),
        explanation=(
            "With prefill and decode on separate instances every request's KV cache (about "
            "0.1 MiB a token for an 8B model, more for larger ones) crosses the link between "
            "them before its first decode step. Over RDMA or NVLink that is milliseconds; over "
            "TCP, or a NIC the transfer engine did not pick, it is a large part of TTFT, and "
            "transfers queue behind each other or time out."
        ),
        next_steps=(
            f"check the connector and its transport: vLLM `{flag(ev, Knob.KV_TRANSFER)} "
            '\'{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda"}\''
            "` with UCX on RDMA (`UCX_TLS=rc,cuda_copy,cuda_ipc` rather than `tcp`; "
            "`kv_buffer_device` `cuda` so the GPU's memory is sent, not staged through the "
            "host); SGLang `--disaggregation-transfer-backend mooncake|nixl` with "
            "`--disaggregation-ib-device mlx5_0` naming the NIC next to the GPU",
            "measure the link the transfer uses: `ib_write_bw -d mlx5_0 --use_cuda 0` "
            "between the prefill and the decode host (RDMA), `iperf3` for TCP, and "
            "`nvidia-smi topo -m` for the GPU–NIC path; the achieved rate above should be "
            "near it",
            "keep short prompts on the decode instance (a prefill-length threshold in the "
            "router) so only long prompts pay the transfer",
            "size the pools for the transfer time: `infertriage plan` for the xPyD split",
        ),
    )


def _seats_room(ev: Evidence, role: str, t: Thresholds) -> bool:
    """The role runs far below what it could: KV under `pd_pool_room` and, where the seats
    are known, running under `pd_pool_room` of them."""
    kv = ev.get(f"pd.{role}_kv_usage")
    if kv is None or kv >= t.pd_pool_room:
        return False
    seats = ev.get("config.max_num_seqs")
    running = ev.get(f"pd.{role}_running_per_instance") or 0.0
    return seats is None or running < t.pd_pool_room * seats


def _pool(ev: Evidence, role: str) -> str:
    n = ev.get(f"pd.{role}_instances") or 0.0
    waiting = ev.get(f"pd.{role}_waiting_per_instance") or 0.0
    running = ev.get(f"pd.{role}_running_per_instance") or 0.0
    kv = ev.get(f"pd.{role}_kv_usage")
    kv_text = "" if kv is None else f", KV {kv:.0%} used"
    return (
        f"{n:.0f} {role} instance{'s' if n != 1 else ''} ({running:.0f} running, "
        f"{waiting:.0f} waiting each{kv_text})"
    )


@rule("parallelism.pd_ratio_mismatch", _L, ("pd.prefill_instances", "pd.decode_instances"))
def pd_ratio_mismatch(ev: Evidence, t: Thresholds) -> Finding | None:
    """The prefill:decode split does not fit the load: one pool queues while the other runs
    far below its capacity.

    Too few prefill instances: `pd_pool_queue` requests wait per prefill instance, or the
    prefill queue takes `queue_share` of TTFT, while the decode instances have room (KV
    under `pd_pool_room`, nothing waiting). Too few decode instances: requests wait per
    decode instance with its KV cache at least `pd_pool_room` used (or full, with ITL over
    its SLO) while the prefill instances idle (at most `pd_idle_running` running, nothing
    waiting, KV under `pd_pool_room`). A bottleneck with the SLO the starved pool sets
    missed, or a queue of the starved pool itself; silent where both pools keep up or both
    are full (then more of both is the answer, which the queue rules say).
    """
    p_wait = ev.get("pd.prefill_waiting_per_instance") or 0.0
    d_wait = ev.get("pd.decode_waiting_per_instance") or 0.0
    d_kv = ev.get("pd.decode_kv_usage")
    # the prefill queue seen in the gauge at the scrapes, or in the time requests queued
    # there (the prefill instance's queue-time histogram against TTFT)
    p_share = ev.get("pd.prefill_queue_share") or 0.0
    p_queues = p_wait >= t.pd_pool_queue or p_share >= t.queue_share
    prefill_short = p_queues and d_wait < 1 and _seats_room(ev, "decode", t)
    p_idle = (
        p_wait < 1
        and (ev.get("pd.prefill_running_per_instance") or 0.0) <= t.pd_idle_running
        and _seats_room(ev, "prefill", t)
    )
    # a decode queue counts where the decode KV cache is in use: requests that wait for
    # their KV to arrive (vLLM counts them waiting) are the link's, not the pool's
    decode_full = d_kv is not None and (
        (d_wait >= t.pd_pool_queue and d_kv >= t.pd_pool_room)
        or (d_kv >= t.kv_full and itl_missed(ev, t))
    )
    decode_short = decode_full and p_idle
    if not (prefill_short or decode_short):
        return None
    pools = f"{_pool(ev, 'prefill')} against {_pool(ev, 'decode')}"
    if prefill_short:
        share = f" (the prefill queue {p_share:.0%} of TTFT)" if p_share else ""
        title = (
            "too few prefill instances: requests queue for prefill while decode has room"
            f"{share}: {pools}"
        )
        bottleneck = ttft_missed(ev, t) or p_share >= t.queue_share
        severity = max(
            severity_above(p_wait, t.pd_pool_queue, 8 * t.pd_pool_queue),
            severity_above(p_share, t.queue_share, 1.0),
        )
        move = "add prefill instances (or move a decode instance to prefill): a larger P in xPyD"
    else:
        title = f"too few decode instances: decode queues or runs full while prefill idles: {pools}"
        bottleneck = itl_missed(ev, t) or ttft_missed(ev, t) or d_wait >= t.pd_pool_queue
        severity = severity_above(
            max(d_wait, t.pd_pool_queue), t.pd_pool_queue, 8 * t.pd_pool_queue
        )
        severity = max(severity, severity_above(d_kv or 0.0, t.kv_full, 1.0))
        move = "add decode instances (or move a prefill instance to decode): a larger D in xPyD"
    return make_finding(
        "parallelism.pd_ratio_mismatch",
        _L,
        bottleneck=bottleneck,
        severity=max(severity, 0.3),
        explains=0.7 if bottleneck else 0.3,
        title=title,
        evidence=ev,
        used=(
            ("pd.prefill_waiting_per_instance", t.pd_pool_queue),
            ("pd.decode_waiting_per_instance", t.pd_pool_queue),
            ("pd.prefill_running_per_instance", t.pd_idle_running),
            ("pd.decode_running_per_instance", None),
            ("pd.prefill_kv_usage", t.pd_pool_room),
            ("pd.decode_kv_usage", t.pd_pool_room),
            ("pd.prefill_queue_share", t.queue_share),
            ("pd.prefill_instances", None),
            ("pd.decode_instances", None),
            ("config.max_num_seqs", None),
        ),
        explanation=(
            "Prefill and decode run on separate pools: a request waits for a prefill "
            "instance, then holds a decode seat until its last token. Each pool's size fits "
            "one share of the load (prompt tokens to prefill, output tokens and concurrency "
            "to decode); when the split is wrong one pool queues while the other's GPUs sit "
            "idle, and adding GPUs to the idle pool buys nothing."
        ),
        next_steps=(
            move,
            "size the split for the rate and the SLOs: `infertriage plan --model … --gpu … "
            "--concurrency …` gives the xPyD counts",
            f"the decode instance's seats: `{flag(ev, Knob.MAX_SEATS)}`"
            + current(ev, "config.max_num_seqs"),
        ),
    )


@rule("parallelism.prefix_affinity_lost", _L, ("dp.ranks",))
def prefix_affinity_lost(ev: Evidence, t: Thresholds) -> Finding | None:
    """Requests that share a prefix reach replicas that do not hold it.

    With two or more ranks or replicas: the server's prefix-cache hit rate under
    `prefix_affinity_ratio` of the prefix reuse the client sent (`workload.prefix_reuse`,
    at least `prefix_min_reuse`), or the ranks' hit rates `prefix_spread` apart; over at
    least `prefix_min_prompts` prompts where the client counted them. A
    bottleneck where the hits lost against the reuse come with TTFT over its SLO; silent
    without reuse measured and with even hit rates.
    """
    # on a P/D deployment a prompt's prefix is looked up where it is prefilled: the replicas
    # that matter are the prefill instances (the dp.prefix_* figures are theirs), not the
    # decode instances the dp.* load figures may describe
    disaggregated = ev.has("pd.prefill_instances")
    ranks = (ev.get("pd.prefill_instances") if disaggregated else ev.get("dp.ranks")) or 1.0
    if ranks < 2:
        return None
    reuse = ev.get("workload.prefix_reuse")
    server_wide = ev.get("prefix_cache.hit_rate")
    ranks_hit = ev.get("dp.prefix_hit_rate")
    hit = ranks_hit if disaggregated or server_wide is None else server_wide
    # no hit anywhere is a cache that is off or cannot keep a prefix, not routing's doing
    caching = (hit or 0.0) > 0.0 or (ev.get("dp.prefix_hit_rate_max") or 0.0) > 0.0
    spread = ev.get("dp.prefix_hit_rate_spread") or 0.0
    # with the KV cache full the prefixes were evicted, wherever they were routed: that is
    # memory's finding (`memory.prefix_cache_low`), not the balancer's
    evicted = (ev.get("kv.usage_max") or 0.0) >= t.kv_full
    lost = (
        reuse is not None
        and reuse >= t.prefix_min_reuse
        and hit is not None
        and hit < t.prefix_affinity_ratio * reuse
        and not evicted
        and caching
    )
    uneven = spread >= t.prefix_spread
    if few_prompts(ev, t) or not (lost or uneven):
        return None
    low, high = ev.get("dp.prefix_hit_rate_min"), ev.get("dp.prefix_hit_rate_max")
    said = []
    if lost and reuse is not None and hit is not None:
        said.append(
            f"the prefix cache hits {hit:.0%} of prompt tokens where the clients reused {reuse:.0%}"
        )
    if uneven and low is not None and high is not None:
        said.append(f"ranks' hit rates run from {low:.0%} to {high:.0%}")
    severity = max(
        severity_below(hit or 0.0, t.prefix_affinity_ratio * (reuse or 0.0), 0.0) if lost else 0.0,
        severity_above(spread, t.prefix_spread, 0.9) if uneven else 0.0,
    )
    return make_finding(
        "parallelism.prefix_affinity_lost",
        _L,
        bottleneck=lost and ttft_missed(ev, t),
        severity=severity,
        explains=min(1.0, (reuse or spread) - (hit or 0.0)) if lost else min(0.5, spread),
        title=f"prefix-cache hits lost across {ranks:.0f} replicas: " + "; ".join(said),
        evidence=ev,
        used=(
            ("workload.prefix_reuse", t.prefix_min_reuse),
            ("workload.prompts", t.prefix_min_prompts),
            ("prefix_cache.hit_rate", None),
            ("dp.prefix_hit_rate", None),
            ("dp.prefix_hit_rate_spread", t.prefix_spread),
            ("dp.prefix_hit_rate_min", None),
            ("dp.prefix_hit_rate_max", None),
            ("dp.ranks", None),
            ("kv.usage_max", t.kv_full),
        ),
        explanation=(
            "Each data-parallel rank or replica holds its own prefix cache. A balancer that "
            "sends requests by load or in turn, not by where their prefix is cached, lands "
            "a shared prefix on a rank that must prefill it again: the hits the clients' "
            "reuse would give are lost, and each rank caches copies of the same prefixes."
        ),
        next_steps=(
            "route by prefix: llm-d's inference scheduler with its prefix-cache-aware "
            "scorer, Dynamo's KV router, or SGLang's router with `--policy cache_aware`",
            "or pin a session to one replica (session affinity on a header such as the "
            "user or conversation id) so its turns find their history cached",
            "vLLM's own data-parallel front end balances by queue only: with one API for "
            "several ranks the shared prefixes are cached on each rank; weigh it against "
            "an external prefix-aware router (`--data-parallel-external-lb`)",
        ),
    )
