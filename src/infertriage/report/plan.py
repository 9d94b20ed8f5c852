"""report, level 4: the `plan` result on screen (rich tables) and as one JSON document.

The model's name (a config file's), what-if values and errors are shown as
data (`schemas.text`).
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infertriage.plan import (
    CapacityPlan,
    PlanReport,
    WhatIfRow,
    calibration_for,
    param_breakdown,
    param_counts,
    serving_fidelity,
)
from infertriage.plan.outcome import MeasuredMaxRate
from infertriage.report.plan_topologies import topologies_to_json, topology_parts
from infertriage.report.traffic import render_traffic, traffic_to_json
from infertriage.schemas.text import show_controls, terminal_text
from infertriage.schemas.units import GIB, format_bytes, format_seconds

__all__ = ["PLAN_SCHEMA", "plan_to_json", "render_plan"]

PLAN_SCHEMA = "infertriage.plan/v1"
EMBEDDING_CONVENTION = (
    "input embedding and lm_head each counted (once when tied); active = per token, "
    "top-k routed experts plus shared ones"
)
_UNCOVERED_ERROR = 0.3  # the spread assumed where no published point covers the GPU


def _params_json(plan: CapacityPlan) -> dict[str, object]:
    spec = plan.inputs.model
    counts, parts = param_counts(spec), param_breakdown(spec)
    return {
        "total": counts.total,
        "active": counts.active,
        "embedding": parts.embedding,
        "lm_head": parts.lm_head,
        "convention": EMBEDDING_CONVENTION,
    }


def _spread(plan: CapacityPlan) -> tuple[float, str]:
    """The relative spread to show around TTFT and ITL, and the statement behind it."""
    cal = calibration_for(plan.inputs.gpu)
    spread = cal.spread(plan.roofline.batch_size) if cal.covered else _UNCOVERED_ERROR
    text = cal.statement()
    if plan.inputs.model.is_moe:
        # The worst MoE point, not the median: real traffic's routing is modelled, not measured.
        spread = max(spread, cal.moe[1] if cal.moe_points else _UNCOVERED_ERROR)
        text += f"; {cal.moe_statement()}"
    if plan.inputs.roofline is not None:
        text = "custom roofline constants: error unknown"
    return spread, text


def _accuracy_json(plan: CapacityPlan) -> dict[str, object]:
    cal = calibration_for(plan.inputs.gpu)
    spread, text = _spread(plan)
    r = plan.roofline
    return {
        "statement": text,
        "covered": cal.covered and (cal.moe_points > 0 or not plan.inputs.model.is_moe),
        "generation": cal.generation,
        "fitted_on": cal.fitted_on,
        "num_points": cal.num_points,
        "median_abs_error": cal.median_abs_error if cal.covered else None,
        "max_abs_error": cal.max_abs_error if cal.covered else None,
        "batch_one_abs_error": list(cal.batch_one) if cal.covered else None,
        "saturation_abs_error": list(cal.saturation) if cal.covered else None,
        "ttft_range_s": [r.ttft_s * (1 - spread), r.ttft_s * (1 + spread)],
        "itl_range_s": [r.itl_s * (1 - spread), r.itl_s * (1 + spread)],
    }


def _serving_statement(plan: CapacityPlan) -> str:
    """The measured error under load for the plan's GPU, unknown with custom constants."""
    if plan.inputs.roofline is not None:
        return "custom roofline constants: error under load unknown"
    return serving_fidelity(plan.inputs.gpu).statement()


def _serving_json(plan: CapacityPlan) -> dict[str, object]:
    fidelity = serving_fidelity(plan.inputs.gpu)
    covered = fidelity.covered and plan.inputs.roofline is None
    return {
        "statement": _serving_statement(plan),
        "covered": covered,
        "generation": fidelity.generation,
        "source": fidelity.source if covered else None,
        # per regime, [median |error|, worst |error|] as fractions
        "regimes": {
            r.name: {
                "stages": r.num_stages,
                "ttft": list(r.ttft),
                "interval": list(r.interval),
                "e2e": list(r.e2e),
            }
            for r in fidelity.regimes
        }
        if covered
        else None,
        "overloads": {
            "real": fidelity.num_real_overloads,
            "reproduced": fidelity.num_reproduced_overloads,
            "false": fidelity.num_false_overloads,
        }
        if covered
        else None,
    }


def _inputs_json(plan: CapacityPlan) -> dict[str, object]:
    i = plan.inputs
    return {
        "model": i.model.name,
        "gpu": i.gpu.name,
        "num_gpus": i.num_gpus or i.gpus_per_instance,
        "tp": i.tp,
        "pp": i.pp,
        "ep": i.ep,
        "dtype": i.dtype,
        "kv_dtype": i.kv_dtype,
        "max_model_len": i.max_model_len,
        "concurrency": i.concurrency,
        "input_len": i.input_len,
        "output_len": i.output_len,
        "tokens_per_request": i.tokens_per_request,
        "gpu_memory_utilization": i.gpu_memory_utilization,
        "max_num_batched_tokens": i.max_num_batched_tokens,
        "block_size": i.block_size,
        "headroom": i.headroom,
    }


def _capacity_json(plan: CapacityPlan) -> dict[str, object]:
    m, kv, r = plan.memory, plan.kv, plan.roofline
    return {
        "memory_per_gpu_bytes": {
            "total": m.total,
            "weights": m.weights,
            "activation_peak": m.activation_peak,
            "cuda_graphs": m.cuda_graphs,
            "runtime": m.runtime,
            "kv_cache": kv.kv_cache_bytes,
        },
        "kv_cache": {
            "bytes_per_token": plan.kv_bytes_per_token,
            "num_gpu_blocks": kv.num_blocks,
            "usable_blocks": kv.usable_blocks,
            "block_size": kv.block_size,
            "num_tokens": kv.num_tokens,
            "vllm_max_concurrency": plan.vllm_max_concurrency,
        },
        "headroom": {
            "peak_kv_demand_bytes": plan.peak_kv_demand_bytes,
            "fits": plan.fits,
            "fits_with_headroom": plan.fits_with_headroom,
            "free_fraction": plan.free_fraction,
            "max_concurrency": plan.max_concurrency,
            "length_cap": plan.length_cap,
        },
        "knobs": [
            {"knob": k.knob, "value": k.value, "max_concurrency": k.max_concurrency, "note": k.note}
            for k in plan.knobs
        ],
        "roofline": {
            "ttft_s": r.ttft_s,
            "itl_s": r.itl_s,
            "batch_size": r.batch_size,
            "prefill_bound": r.prefill.bound,
            "decode_bound": r.decode.bound,
            "decode_comm_s": r.decode.comm_s,
            "throughput_tok_s": r.throughput_tok_s,
            "kv_bound_batch": r.kv_bound_batch,
            "kv_bound_throughput_tok_s": r.kv_bound_throughput_tok_s,
            "pp_bubble": r.pp_bubble,
        },
    }


def _row_json(row: WhatIfRow) -> dict[str, object]:
    out: dict[str, object] = {"values": dict(row.values), "error": row.error or None}
    if row.plan is not None:
        out.update(_capacity_json(row.plan))
    return out


def plan_to_json(report: PlanReport) -> dict[str, object]:
    advice = report.advice
    document: dict[str, object] = {
        "schema": PLAN_SCHEMA,
        "inputs": _inputs_json(report.plan),
        "parameters": _params_json(report.plan),
        **_capacity_json(report.plan),
        "accuracy": _accuracy_json(report.plan),
        "serving_fidelity": _serving_json(report.plan),
        "advice": None
        if advice is None
        else {
            "tp": advice.tp,
            "pp": advice.pp,
            "ep": advice.ep,
            "dp": advice.dp,
            "reasons": list(advice.reasons),
        },
        "advice_error": report.advice_error or None,
        "itl_efficiency": report.itl_efficiency,
        "throughput_efficiency": report.throughput_efficiency,
        "cost_per_million_output_tokens": report.cost_per_million_output_tokens,
        "what_if": [_row_json(row) for row in report.what_if],
        **topologies_to_json(report),
    }
    if report.from_run is not None:
        w = report.from_run
        document["from_run"] = {
            "num_requests": w.num_requests,
            "mean_input_len": w.mean_input_len,
            "mean_output_len": w.mean_output_len,
            "mean_concurrency": w.mean_concurrency,
            "output_tok_s": w.output_tok_s,
            "max_rate": _max_rate_json(w.max_rate),
            "replicas_at_rate": report.replicas_at_rate,
        }
    if report.traffic is not None:
        document["traffic"] = traffic_to_json(report.traffic)
    return document


def _max_rate_json(found: MeasuredMaxRate | None) -> dict[str, object] | None:
    if found is None:
        return None
    return {
        "max_rate": found.rate_rps,
        "bracket_high": found.bracket_high_rps,
        "rule": found.rule,
        "target": found.target,
        "slos": dict(found.slos),
        "attainment": found.attainment,
        "attainment_interval": list(found.attainment_interval)
        if found.attainment_interval
        else None,
    }


def _max_rate_lines(report: PlanReport) -> Text:
    """The run's goodput search, used as one replica's measured capacity."""
    text = Text()
    w = report.from_run
    if w is None or w.max_rate is None:
        return text
    found = w.max_rate
    slos = show_controls(", ".join(f"{m} ≤ {limit * 1e3:g} ms" for m, limit in found.slos))
    held = (
        f"attainment ≥ {found.target:.0%} of requests meeting {slos}"
        if found.rule == "attainment"
        else f"MLPerf server p99 {slos}"
    )
    text.append(
        f"Measured capacity (the run's goodput search): {found.rate_rps:.3g} req/s per replica "
        f"({held}); planned at that level's {w.mean_input_len}-in, {w.mean_output_len}-out "
        f"and {w.mean_concurrency:.1f} in flight\n"
    )
    if report.replicas_at_rate is not None:
        text.append(f"At --rate: {report.replicas_at_rate} replicas of the measured capacity\n")
    return text


def _memory_table(plan: CapacityPlan) -> Table:
    m, kv = plan.memory, plan.kv
    table = Table(title="Memory per GPU", title_justify="left", show_header=False)
    table.add_column("part")
    table.add_column("size", justify="right")
    rows = [
        ("total", m.total),
        ("weights", m.weights),
        ("activation peak", m.activation_peak),
        ("CUDA graphs", m.cuda_graphs),
        ("runtime (context, NCCL)", m.runtime),
        ("KV cache (vLLM allocates)", kv.kv_cache_bytes),
    ]
    for name, size in rows:
        table.add_row(name, f"{format_bytes(size)}  {size / m.total:6.1%}")
    return table


def _kv_lines(plan: CapacityPlan) -> Text:
    i, kv = plan.inputs, plan.kv
    verdict = (
        "fits"
        if plan.fits_with_headroom
        else ("fits, no headroom" if plan.fits else "does NOT fit")
    )
    style = "green" if plan.fits_with_headroom else ("yellow" if plan.fits else "red bold")
    text = Text()
    text.append(
        f"KV cache: {plan.kv_bytes_per_token:,} B/token per GPU; {kv.num_blocks:,} blocks × "
        f"{kv.block_size} tokens = {kv.num_tokens:,} tokens "
        f"(vLLM: max concurrency {plan.vllm_max_concurrency:.2f}× for {i.max_model_len} tokens)\n"
    )
    text.append(
        f"Demand: {i.concurrency} × {i.tokens_per_request} tokens = "
        f"{format_bytes(plan.peak_kv_demand_bytes)} per GPU → "
    )
    text.append(verdict, style=style)
    text.append(
        f" ({plan.free_fraction:.1%} of the GPU free at peak; keep ≥ {i.headroom:.0%})\n"
        f"Largest concurrency with headroom: {plan.max_concurrency}; "
        f"per-request length cap: {plan.length_cap} tokens\n"
    )
    if plan.knobs and not plan.fits_with_headroom:
        best = plan.knobs[0]
        text.append(
            f"Knob that helps most: --{best.knob} {best.value} → {best.max_concurrency} requests"
            f"{f' ({best.note})' if best.note else ''}\n"
        )
    return text


def _value(seconds: float, spread: float) -> str:
    """`12.3 ms`, or `10.1–14.5 ms` where the model's spread is wider than 10 %."""
    if spread <= 0.1:
        return format_seconds(seconds)
    return f"{format_seconds(seconds * (1 - spread))}–{format_seconds(seconds * (1 + spread))}"


def _params_line(plan: CapacityPlan) -> Text:
    counts = param_counts(plan.inputs.model)
    return Text(
        f"Parameters: {counts.total / 1e9:.2f} B total, {counts.active / 1e9:.2f} B active per "
        f"token (input embedding and lm_head counted, once if tied)\n"
    )


def _roofline_lines(report: PlanReport) -> Text:
    r = report.plan.roofline
    spread, statement = _spread(report.plan)
    text = Text()
    text.append(
        f"Roofline: TTFT {_value(r.ttft_s, spread)} (prefill {r.prefill.bound}-bound), "
        f"ITL {_value(r.itl_s, spread)} at batch {r.batch_size} ({r.decode.bound}-bound"
        f", all-reduce {format_seconds(r.decode.comm_s)})\n"
        f"Model error: {statement}\n"
        f"Serving error: {_serving_statement(report.plan)}\n"
        f"Throughput ceiling: {r.throughput_tok_s:,.0f} output tok/s at batch {r.batch_size}; "
        f"{r.kv_bound_throughput_tok_s:,.0f} tok/s at the KV-cache limit "
        f"(batch {r.kv_bound_batch})\n"
    )
    if r.pp_bubble:
        text.append(f"Pipeline bubble: {r.pp_bubble:.0%} of each stage's time\n")
    if report.itl_efficiency is not None:
        text.append(f"Measured ITL efficiency vs roofline: {report.itl_efficiency:.0%}\n")
    if report.throughput_efficiency is not None:
        text.append(f"Measured throughput vs roofline: {report.throughput_efficiency:.0%}\n")
    if report.cost_per_million_output_tokens is not None:
        text.append(
            f"Cost: ${report.cost_per_million_output_tokens:.3f} per million output tokens\n"
        )
    return text


def _advice_lines(report: PlanReport) -> Text:
    text = Text()
    if report.advice is None:
        text.append(f"Parallelism: {show_controls(report.advice_error)}\n", style="red")
        return text
    a = report.advice
    text.append(
        f"Parallelism: TP={a.tp} PP={a.pp} EP={'on' if a.ep else 'off'} DP={a.dp}\n", style="bold"
    )
    for reason in a.reasons:
        text.append(f"  • {show_controls(reason)}\n")
    return text


def _what_if_table(rows: tuple[WhatIfRow, ...]) -> Table:
    table = Table(title="What if", title_justify="left")
    for key, _ in rows[0].values:
        table.add_column(terminal_text(key))
    for name in ("fits", "KV blocks", "max conc.", "TTFT", "ITL", "tok/s"):
        table.add_column(name, justify="right")
    for row in rows:
        cells = [terminal_text(text) for _, text in row.values]
        p = row.plan
        if p is None:
            table.add_row(*cells, "error", terminal_text(row.error), "", "", "", "")
            continue
        fits = "yes" if p.fits_with_headroom else ("tight" if p.fits else "no")
        table.add_row(
            *cells,
            fits,
            f"{p.kv.num_blocks:,}",
            str(p.max_concurrency),
            format_seconds(p.roofline.ttft_s),
            format_seconds(p.roofline.itl_s),
            f"{p.roofline.throughput_tok_s:,.0f}",
        )
    return table


def render_plan(report: PlanReport, console: Console) -> None:
    plan = report.plan
    i = plan.inputs
    console.print(
        terminal_text(
            f"{i.model.name} ({i.dtype}, KV {i.kv_dtype}) on {i.num_gpus or i.gpus_per_instance} × "
            f"{i.gpu.name} ({i.gpu.memory_bytes / GIB:.1f} GiB), TP={i.tp} PP={i.pp}, "
            f"max_model_len {i.max_model_len}",
            style="bold",
        )
    )
    parts: list[Table | Text | Group] = [
        _params_line(plan),
        _memory_table(plan),
        _kv_lines(plan),
        _roofline_lines(report),
        _max_rate_lines(report),
    ]
    parts.append(_advice_lines(report))
    if report.what_if:
        parts.append(_what_if_table(report.what_if))
    if report.traffic is not None:
        parts.append(render_traffic(report.traffic))
    parts.extend(topology_parts(report))
    console.print(Group(*parts))
