"""diagnose, level 3: parallelism-layer rules — communication share, overlap, TP over PCIe,
skew, and data-parallel ranks that carry uneven load."""

from __future__ import annotations

from typing import NamedTuple

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.symptom import current, flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.PARALLELISM


@rule("parallelism.communication_share", _L, ("trace.nccl_fraction",))
def communication_share(ev: Evidence, t: Thresholds) -> Finding | None:
    """All-reduce's share of GPU time: a bottleneck when an SLO is missed, when it reaches
    `comm_bound`, or, over PCIe, at once where replicas at a smaller TP would fit (the plan):
    a cost the deployment need not pay. Over NVLink a smaller TP that fits is said (a
    warning): there TP buys lower ITL, a choice the SLOs, not the plan, judge."""
    share = ev.get("trace.nccl_fraction") or 0.0
    if share < t.comm_share:
        return None
    over_pcie = (ev.get("config.interconnect_pcie") or 0.0) >= 1
    where = " over PCIe" if over_pcie else ""
    tp, smallest = ev.get("config.tensor_parallel"), ev.get("plan.smallest_tp_that_fits")
    avoidable = tp is not None and smallest is not None and smallest < tp
    gain = (
        f"; TP {smallest:.0f} replicas would fit, up to {1 / (1 - share):.1f}× the throughput"
        if avoidable
        else ""
    )
    return make_finding(
        "parallelism.communication_share",
        _L,
        bottleneck=slo_missed(ev, t) or share >= t.comm_bound or (avoidable and over_pcie),
        severity=severity_above(share, t.comm_share, 0.7),
        explains=share,
        title=f"all-reduce takes {share:.0%} of GPU time{where}{gain}",
        evidence=ev,
        used=(
            ("trace.nccl_fraction", t.comm_share),
            ("config.interconnect_pcie", None),
            ("plan.smallest_tp_that_fits", None),
        ),
        explanation=(
            "Tensor parallelism all-reduces twice per layer; over a slow link the GPUs spend "
            "the step waiting for each other."
        ),
        next_steps=(
            _replicas(tp, smallest)
            or "keep tensor parallelism inside an NVLink domain"
            + (", or run one replica per GPU (data parallelism) instead" if over_pcie else ""),
            f"lower `{flag(ev, Knob.TENSOR_PARALLEL)}`" + current(ev, "config.tensor_parallel"),
            "check the plan: `infertriage plan --model … --gpu … --num-gpus …`",
            "measure the link: save `nvidia-smi topo -m` and nccl-tests `all_reduce_perf -b 8 "
            "-e 1G -f 2 -g N`, then `infertriage topology --nvidia-smi-topo F --nccl-tests F "
            "--model … --gpu …` says which TP degrees it carries",
        ),
    )


def _replicas(tp: float | None, smallest: float | None) -> str:
    if tp is None or smallest is None or smallest >= tp:
        return ""
    return f"run {tp / smallest:.0f} replicas of TP {smallest:.0f} instead (the plan fits them)"


@rule("parallelism.poor_overlap", _L, ("trace.nccl_fraction", "trace.comm_overlap_fraction"))
def poor_overlap(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.nccl_fraction") or 0.0
    overlap = ev.get("trace.comm_overlap_fraction") or 0.0
    if share < t.min_comm_share or overlap >= t.poor_overlap:
        return None
    return make_finding(
        "parallelism.poor_overlap",
        _L,
        bottleneck=False,
        severity=severity_below(overlap, t.poor_overlap, 0.0),
        explains=share,
        title=f"communication overlaps compute only {overlap:.0%} of the time",
        evidence=ev,
        used=(
            ("trace.comm_overlap_fraction", t.poor_overlap),
            ("trace.nccl_fraction", t.min_comm_share),
        ),
        explanation="Every all-reduce stalls the compute stream instead of hiding behind it.",
        next_steps=("enable compute/communication overlap (async TP, sequence parallelism)",),
    )


@rule("parallelism.rank_skew", _L, ("trace.rank_skew_fraction",))
def rank_skew(ev: Evidence, t: Thresholds) -> Finding | None:
    skew = ev.get("trace.rank_skew_fraction") or 0.0
    if skew < t.rank_skew:
        return None
    return make_finding(
        "parallelism.rank_skew",
        _L,
        bottleneck=False,
        severity=severity_above(skew, t.rank_skew, 0.5),
        explains=skew,
        title=f"ranks differ by {skew:.0%} in busy time",
        evidence=ev,
        used=(("trace.rank_skew_fraction", t.rank_skew),),
        explanation="The slowest rank sets the pace; the others wait at every collective.",
        next_steps=("check for a throttled or shared GPU; balance experts or pipeline stages",),
    )


@rule("parallelism.scaling_below_plan", _L, ("scaling.efficiency", "scaling.gpu_ratio"))
def scaling_below_plan(ev: Evidence, t: Thresholds) -> Finding | None:
    measured = ev.get("scaling.efficiency") or 0.0
    planned = ev.get("scaling.plan_efficiency")
    expected = planned * t.scaling_of_plan if planned is not None else t.scaling_no_plan
    if measured >= expected:
        return None
    ratio = ev.get("scaling.gpu_ratio") or 2.0
    basis = f"the plan's {planned:.0%}" if planned is not None else "no plan to compare"
    return make_finding(
        "parallelism.scaling_below_plan",
        _L,
        bottleneck=(ev.get("scaling.this_is_larger") or 0.0) >= 1,
        severity=severity_below(measured, expected, 0.0),
        explains=min(1.0, 1.0 - measured / (planned or 1.0)),
        title=(
            f"{ratio:.0f}× the GPUs gave {measured * ratio:.2f}× the throughput: "
            f"{measured:.0%} scaling efficiency ({basis})"
        ),
        evidence=ev,
        used=(
            ("scaling.efficiency", expected),
            ("scaling.plan_efficiency", None),
            ("scaling.gpu_ratio", None),
        ),
        explanation=(
            "The larger deployment lost more to communication and synchronisation than its "
            "interconnect should cost: the ranks talk over a slower path than planned, wait on "
            "each other, or the load is too small to use the extra GPUs."
        ),
        next_steps=(
            "check the path the ranks really use: `nvidia-smi topo -m` and `NCCL_DEBUG=INFO` "
            "(P2P/NVLink, or SHM/PCIe)",
            "profile both sizes (`--profile 5`) and compare the all-reduce share",
            "when the model fits fewer GPUs, run replicas instead: "
            "`infertriage plan --model … --gpu … --what-if tp=1,2,4`",
        ),
    )


class _Rank(NamedTuple):
    """One data-parallel rank's figures over the window: which, running, waiting, KV used."""

    rank: float
    running: float
    waiting: float
    kv_usage: float | None

    def said(self) -> str:
        kv = "" if self.kv_usage is None else f", KV {self.kv_usage:.0%} used"
        return f"{self.running:.0f} running, {self.waiting:.0f} waiting{kv}"


def _rank(ev: Evidence, which: str) -> _Rank:
    return _Rank(
        ev.get(f"dp.{which}_rank") or 0.0,
        ev.get(f"dp.{which}_running") or 0.0,
        ev.get(f"dp.{which}_waiting") or 0.0,
        ev.get(f"dp.{which}_kv_usage"),
    )


def _per_rank(ev: Evidence) -> tuple[str, ...]:
    """The per-rank signals present (`dp.running_by_rank.0`…), in rank order."""
    names = [n for n in ev.signals if n.startswith(("dp.running_by_rank.", "dp.waiting_by_rank."))]
    names += [n for n in ev.signals if n.startswith("dp.kv_usage_by_rank.")]
    return tuple(sorted(names, key=lambda n: (n.rsplit(".", 1)[1].zfill(6), n)))


def _ranks_text(ev: Evidence) -> str:
    """`rank 0: 64 running, 30 waiting, KV 97 % used; rank 1: …` from the per-rank signals."""
    found: dict[str, dict[str, float]] = {}
    for name in _per_rank(ev):
        figure, rank = name.removeprefix("dp.").split("_by_rank.")
        found.setdefault(rank, {})[figure] = ev.get(name) or 0.0
    return "; ".join(
        f"rank {rank}: "
        + _Rank(0.0, f.get("running", 0.0), f.get("waiting", 0.0), f.get("kv_usage")).said()
        for rank, f in found.items()
    )


def _among(ev: Evidence) -> str:
    """With prefill/decode roles, which role's instances the ranks were compared within."""
    role = {1.0: "prefill", 2.0: "decode"}.get(ev.get("dp.role") or 0.0)
    return f" among the {role} instances" if role else ""


def engine_running(ev: Evidence) -> float:
    """The running requests to hold against one engine's seats (`max_num_seqs` is per
    engine): with data-parallel ranks, the most one rank ran; else the server's."""
    if (ev.get("dp.ranks") or 1.0) >= 2 and ev.has("dp.rank_running_max"):
        return ev.get("dp.rank_running_max") or 0.0
    return ev.get("queue.running_max") or 0.0


@rule("parallelism.dp_rank_imbalance", _L, ("dp.ranks",))
def dp_rank_imbalance(ev: Evidence, t: Thresholds) -> Finding | None:
    """One data-parallel rank carries far more than the mean rank (running + waiting).

    A bottleneck when requests wait on the busiest rank while another has room (fewer
    running, or its KV cache not full, and nothing waiting), or when the busiest runs a
    real batch (`dp_busy_batch`) while another rank runs nothing: the server's total
    looks healthy while one engine queues or carries the load of several. Milder
    imbalance is a warning, once the busiest rank carries `min_excess_requests` requests more
    than the mean rank (below it the ranks are mostly idle and the ratio is chance).
    """
    ranks, ratio = ev.get("dp.ranks") or 1.0, ev.get("dp.imbalance") or 1.0
    if ranks < 2 or ratio < t.dp_imbalance:
        return None
    busy, idle = _rank(ev, "busiest"), _rank(ev, "idlest")
    kv_room = idle.kv_usage is not None and idle.kv_usage < t.kv_full
    stranded = busy.waiting >= 1 and idle.waiting < 1 and (idle.running < busy.running or kv_room)
    idle_gpus = idle.running + idle.waiting <= 0 and busy.running >= t.dp_busy_batch
    busy_load = busy.running + busy.waiting
    if not (stranded or idle_gpus) and busy_load - busy_load / ratio < t.min_excess_requests:
        return None  # a request or less above the mean rank: chance, not a routing fault
    where = f"rank {busy.rank:.0f} ({busy.said()}) against rank {idle.rank:.0f} ({idle.said()})"
    if stranded:
        title = (
            f"{busy.waiting:.0f} requests wait on data-parallel rank {busy.rank:.0f} while "
            f"rank {idle.rank:.0f} has room: {where}"
        )
    elif idle_gpus:
        title = f"one data-parallel rank does the work while another idles: {where}"
    else:
        title = f"data-parallel ranks carry uneven load: {where}"
    return make_finding(
        "parallelism.dp_rank_imbalance",
        _L,
        bottleneck=stranded or idle_gpus,
        severity=severity_above(ratio, t.dp_imbalance, ranks),
        explains=min(1.0, (ratio - 1.0) / (ranks - 1.0)),
        title=title + f" ({ranks:.0f} ranks{_among(ev)}, {ratio:.1f}× the mean)",
        evidence=ev,
        used=(
            ("dp.imbalance", t.dp_imbalance),
            ("dp.ranks", None),
            ("dp.busiest_waiting", 0.0),
            ("dp.busiest_running", t.dp_busy_batch),
            ("dp.idlest_waiting", None),
            ("dp.idlest_kv_usage", t.kv_full),
            *((name, None) for name in _per_rank(ev)),
        ),
        explanation=(
            "Each data-parallel rank is a whole engine with its own queue and KV cache; "
            "requests sent to one rank wait there whatever room the others have, and the "
            f"server's totals hide it. Per rank: {_ranks_text(ev)}."
        ),
        next_steps=(
            "find what sends the busy rank more: vLLM's own front end picks the engine with "
            "the least `waiting × 4 + running` per request, so a rank that queues alone is fed "
            "from outside it (a load balancer per rank with `--data-parallel-external-lb` or "
            "`--data-parallel-hybrid-lb`, or requests that name their `data_parallel_rank`); "
            "SGLang routes by `--load-balance-method` (`shortest_queue` rather than "
            "`round_robin`)",
            "balance an external router on each rank's queue (`vllm:num_requests_waiting` by "
            "`engine`, `sglang:num_queue_reqs` by `dp_rank`), not round-robin over "
            "connections: HTTP keep-alive and session affinity pin clients to one rank",
            "read the ranks under load: `infertriage diagnose --url URL` keeps each rank's "
            "queue apart",
        ),
    )
