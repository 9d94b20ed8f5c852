"""report, level 4: the modern topologies a plan sized, on screen and in JSON (DP/TP/EP, xPyD, PP).

Takes a `PlanReport`; gives its `layout`, `disagg`, `pipeline` and `offload` parts as rich
renderables (`topology_parts`) and as JSON members (`topologies_to_json`: `layout`,
`disaggregated`, `pipeline`, `offload`, each null when the plan did not size it). Figures
stay in SI in the JSON; milliseconds only on screen.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from infertriage.schemas.text import show_controls
from infertriage.schemas.units import format_bytes
from infertriage.schemas.units import format_seconds as _ms

if TYPE_CHECKING:  # annotations only: the sections a plan without them needs no module of
    from infertriage.plan import PlanReport
    from infertriage.plan.disagg import DisaggPlan, Pool
    from infertriage.plan.offload import OffloadPlan
    from infertriage.plan.parallel_choice import LayoutChoice
    from infertriage.plan.pipeline import PipelinePlan

__all__ = ["ASSUMPTIONS", "topologies_to_json", "topology_parts"]

ASSUMPTIONS = (
    "Poisson arrivals, queueing at the SLO's percentile as M/M/1, every prompt and output of "
    "the given lengths, one NIC per GPU for the KV link, step times from the roofline (its "
    "error above applies)"
)


def _pool_json(pool: Pool | None) -> dict[str, object] | None:
    if pool is None:
        return None
    return {**dataclasses.asdict(pool), "gpus": pool.gpus}


def _disagg_json(plan: DisaggPlan) -> dict[str, object]:
    def part(instance: object, pool: Pool | None) -> dict[str, object] | None:
        if instance is None or pool is None:
            return None
        assert dataclasses.is_dataclass(instance) and not isinstance(instance, type)
        return {**dataclasses.asdict(instance), "pool": _pool_json(pool)}

    return {
        "name": plan.name,
        "winner": plan.winner,
        "reason": plan.reason,
        "gpus": plan.gpus,
        "colocated_gpus": plan.colocated_gpus,
        "rate_req_s": plan.rate,
        "input_len": plan.input_len,
        "output_len": plan.output_len,
        "slo": dataclasses.asdict(plan.slo),
        "kv_link": dataclasses.asdict(plan.link),
        "headroom": plan.headroom,
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "assumptions": ASSUMPTIONS,
        "prefill": part(plan.prefill, plan.prefill_pool),
        "decode": part(plan.decode, plan.decode_pool),
        "colocated": part(plan.colocated, plan.colocated_pool),
    }


def _layout_json(choice: LayoutChoice) -> dict[str, object]:
    return {
        "num_gpus": choice.num_gpus,
        "load": choice.load,
        "slo": dataclasses.asdict(choice.slo),
        "options": [dataclasses.asdict(o) for o in choice.options],
        "pick": None if choice.pick is None else choice.pick.name,
        "reason": choice.reason,
    }


def _pipeline_json(plan: PipelinePlan) -> dict[str, object]:
    document = dataclasses.asdict(plan)
    document["bubbles"] = [{"micro_batches": m, "bubble": b} for m, b in plan.bubbles]
    return document


def topologies_to_json(report: PlanReport) -> dict[str, object]:
    """`layout`, `disaggregated`, `pipeline` and `offload`: null where the plan has none."""
    return {
        "layout": None if report.layout is None else _layout_json(report.layout),
        "disaggregated": None if report.disagg is None else _disagg_json(report.disagg),
        "pipeline": None if report.pipeline is None else _pipeline_json(report.pipeline),
        "offload": None if report.offload is None else dataclasses.asdict(report.offload),
    }


# ---------------------------------------------------------------------------- screen


def _layout_table(choice: LayoutChoice) -> Table:
    table = Table(
        title=(
            f"Layouts of {choice.num_gpus} GPUs at {choice.load} "
            f"(SLO TTFT {_ms(choice.slo.ttft_s)}, ITL {_ms(choice.slo.itl_s)})"
        ),
        title_justify="left",
    )
    for name in ("layout", "batch/replica", "ITL", "TTFT", "tok/s/GPU in SLO", "KV tok/GPU", "SLO"):
        table.add_column(name, justify="left" if name == "layout" else "right")
    for o in choice.options:
        mark = "→ " if o is choice.pick else "  "
        table.add_row(
            mark + o.name,
            str(o.batch),
            _ms(o.itl_s),
            _ms(o.ttft_s),
            f"{o.tok_s_per_gpu:,.0f}",
            f"{o.kv_tokens_per_gpu:,}",
            "meets" if o.meets_slo else ("KV short" if not o.fits_load else "misses"),
        )
    return table


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _disagg_lines(plan: DisaggPlan) -> Text:
    text = Text()
    colocated = plan.colocated_pool
    versus = (
        f"colocated {colocated.instances} × TP{colocated.tp} = {_gpus(colocated.gpus)}"
        if colocated is not None
        else "no colocated deployment meets the SLOs"
    )
    split = (
        f"{plan.name}, {_gpus(plan.gpus)}" if plan.gpus is not None else "no xPyD meets the SLOs"
    )
    style = "bold green" if plan.winner == "disaggregated" else "bold"
    text.append(
        f"disaggregated: {split}, vs {versus} → {plan.winner} "
        f"(at {plan.rate:g} req/s, {plan.input_len} → {plan.output_len} tokens, "
        f"KV link {plan.link.bandwidth_bytes_per_s / 1e9:g} GB/s + {_ms(plan.link.latency_s)})\n",
        style=style,
    )
    p, pp = plan.prefill, plan.prefill_pool
    if p is not None and pp is not None:
        text.append(
            f"  prefill: {pp.instances} × TP{p.tp}, {p.prompts_per_step} prompt(s)/step of "
            f"{_ms(p.step_s)}, KV transfer {_ms(p.transfer_s)}, TTFT p95 {_ms(p.ttft_s)}; "
            f"{p.capacity_req_s:.2f} req/s each ({p.limited_by}), {pp.utilisation:.0%} busy\n"
        )
    d, dp = plan.decode, plan.decode_pool
    if d is not None and dp is not None:
        text.append(
            f"  decode: {dp.instances} × TP{d.tp}, batch {d.batch}, ITL {_ms(d.itl_s)}; "
            f"{d.capacity_req_s:.2f} req/s each ({d.limited_by}), {dp.utilisation:.0%} busy\n"
        )
    c, cp = plan.colocated, plan.colocated_pool
    if c is not None and cp is not None:
        text.append(
            f"  colocated: {cp.instances} × TP{c.tp}, prefill chunk {c.chunk_tokens}, batch "
            f"{c.batch}, ITL p95 {_ms(c.itl_s)} (prefill in {c.mixed_share:.0%} of steps: "
            f"{_ms(c.mixed_step_s)} vs {_ms(c.decode_step_s)}), TPOT {_ms(c.tpot_s)}, TTFT p95 "
            f"{_ms(c.ttft_s)}; {c.capacity_req_s:.2f} req/s each ({c.limited_by})\n"
        )
    text.append(f"  why: {plan.reason}\n")
    text.append(f"  assumes: {ASSUMPTIONS}\n", style="dim")
    return text


def _pipeline_lines(plan: PipelinePlan) -> Text:
    bubbles = ", ".join(f"m={m}: {b:.0%}" for m, b in plan.bubbles)
    return Text(
        f"Pipeline: TP {plan.tp} × PP {plan.pp}. {plan.reason}\n"
        f"  bubble (p−1)/(m+p−1): {bubbles}; keep ≥ {plan.micro_batches} micro-batches "
        f"(requests' batches) in flight for ≤ {plan.target_bubble:.0%}; at concurrency "
        f"{plan.concurrency}: {plan.bubble_at_concurrency:.0%}\n"
        f"  TTFT {_ms(plan.ttft_s)} (stages in series, hops {_ms(plan.hops_s)}) vs "
        f"{_ms(plan.ttft_one_domain_s)} were all {plan.tp * plan.pp} GPUs one NVLink domain, "
        f"{_ms(plan.ttft_wide_tp_s)} at TP {plan.tp * plan.pp} across nodes\n"
    )


def _offload_lines(plan: OffloadPlan) -> Text:
    text = Text(
        f"Offload: {format_bytes(int(plan.offload_bytes))} CPU tier holds "
        f"{plan.tier_tokens:,} more KV tokens ({plan.tier_prefixes:,} prefixes of "
        f"{plan.prefix_tokens:,}) beside the GPU's spare {plan.gpu_spare_tokens:,} "
        f"({plan.gpu_prefixes:,}); host → GPU {plan.host_bw_bytes_per_s / 1e9:.1f} GB/s per GPU\n"
        f"  {plan.verdict}\n"
    )
    if plan.max_saved_s_per_s is not None and plan.rate is not None:
        text.append(
            f"  at {plan.rate:g} req/s, were every prefix a tier hit: at most "
            f"{plan.max_saved_s_per_s:.2f} instance-seconds of prefill saved per second\n"
        )
    return text


def topology_parts(report: PlanReport) -> list[Table | Text]:
    """What the plan sized of the modern topologies, in the order a reader asks."""
    parts: list[Table | Text] = []
    if report.layout is not None:
        if report.layout.options:
            parts.append(_layout_table(report.layout))
        parts.append(Text(f"  pick: {show_controls(report.layout.reason)}\n"))
    if report.disagg is not None:
        parts.append(_disagg_lines(report.disagg))
    if report.pipeline is not None:
        parts.append(_pipeline_lines(report.pipeline))
    if report.offload is not None:
        parts.append(_offload_lines(report.offload))
    return parts
