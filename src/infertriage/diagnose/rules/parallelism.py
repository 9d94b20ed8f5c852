"""diagnose, level 3: parallelism-layer rules — communication share, overlap, TP over PCIe, skew."""

from __future__ import annotations

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
