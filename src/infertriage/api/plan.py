"""api, level 5: the `plan` command's entry point.

`plan` takes a `PlanSpec` (`api.specs`), does the whole job of the command
and returns a typed `PlanReport`; the CLI only parses and renders. Errors the
user can fix are `UserError`s.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from infertriage.api.specs_offline import PlanSpec
from infertriage.plan import (
    CapacityPlan,
    PlanInputs,
    PlanReport,
    RunWorkload,
    advise_parallelism,
    get_gpu,
    load_model,
    make_capacity_plan,
    normalize_dtype,
    sweep,
)
from infertriage.plan.outcome import MeasuredMaxRate
from infertriage.plan.pipeline import make_pipeline_plan
from infertriage.schemas import UserError, load_thresholds
from infertriage.schemas.units import GIB

if TYPE_CHECKING:
    from infertriage.plan.disagg import DisaggPlan
    from infertriage.plan.offload import OffloadPlan
    from infertriage.plan.parallel_choice import LayoutChoice
    from infertriage.plan.pdpools import ServingSlo
    from infertriage.schemas import RunDir, Thresholds

# What only an option sizes (the measured interconnect, DP/TP/EP on several GPUs, xPyD,
# a CPU KV tier) is imported where that option is handled: a plain plan starts without it.

__all__ = ["PlanSpec", "plan", "summarize_run_workload"]


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def read_max_rate(run: RunDir) -> MeasuredMaxRate | None:
    """The goodput search a bench run's run.json holds (`bench --find-max-rate`), if any."""
    found = getattr(run.read_info().summary, "max_rate", None)
    if not isinstance(found, dict) or (rate := _float(found.get("max_rate"))) is None:
        return None
    interval = found.get("attainment_interval")
    bracket = found.get("bracket")
    slos = found.get("slos")
    return MeasuredMaxRate(
        rate_rps=rate,
        bracket_high_rps=_float(bracket[1]) if isinstance(bracket, list) and bracket else None,
        rule=str(found.get("rule", "attainment")),
        target=_float(found.get("target")) or 0.0,
        slos=tuple((k, float(v)) for k, v in slos.items() if isinstance(v, int | float))
        if isinstance(slos, dict)
        else (),
        attainment=_float(found.get("attainment")),
        attainment_interval=(float(interval[0]), float(interval[1]))
        if isinstance(interval, list) and len(interval) == 2
        else None,
    )


def summarize_run_workload(run_dir: Path) -> RunWorkload:
    """Mean prompt and output lengths, concurrency (Little's law) and output tokens/s of a run.

    A run that searched its max rate (`bench --find-max-rate`) is summarised by the level(s)
    at the rate found, and carries that rate: one replica's measured capacity under the SLOs.
    """
    # a run's files (and run.json's models) load for `--from-run` only
    from infertriage.schemas import RequestRecord, RunDir  # noqa: PLC0415

    run = RunDir.open(run_dir)
    max_rate = read_max_rate(run)
    records = [r for r in run.iter_records(run.requests, RequestRecord) if r.ok]
    if max_rate is not None:
        from infertriage.api.maxrate import level_names  # noqa: PLC0415  # a run's levels: numpy

        names = level_names(max_rate.rate_rps)
        records = [r for r in records if r.labels.get("level") in names]
    measured = [r for r in records if r.end_ts is not None and r.output_tokens is not None]
    if not measured:
        raise UserError(f"{run.requests} holds no successful request to plan from.")
    start = min(r.sent_ts for r in measured)
    end = max(r.end_ts or 0.0 for r in measured)
    wall = max(end - start, 1e-9)
    latency = sum((r.end_ts or 0.0) - r.sent_ts for r in measured)
    return RunWorkload(
        num_requests=len(measured),
        mean_input_len=round(sum(r.prompt_tokens or 0 for r in measured) / len(measured)),
        mean_output_len=max(1, round(sum(r.output_tokens or 0 for r in measured) / len(measured))),
        mean_concurrency=latency / wall,
        output_tok_s=sum(r.output_tokens or 0 for r in measured) / wall,
        max_rate=max_rate,
    )


def _with_measured_link(spec: PlanSpec, inputs: PlanInputs, concurrency: int | None) -> PlanInputs:
    """`inputs` on the measured interconnect (`--nvidia-smi-topo`, `--nccl-tests`), if given:
    its bus bandwidth at the planned batch's all-reduce (a curve with no --concurrency plans
    replicas near max_num_seqs)."""
    if spec.nvidia_smi_topo is None and not spec.nccl_tests:
        return inputs
    from infertriage.api.topology import read_interconnect  # noqa: PLC0415  # see the imports
    from infertriage.plan.topology import measured_gpu  # noqa: PLC0415

    topo, runs = read_interconnect(spec.nvidia_smi_topo, spec.nccl_tests)
    planned = inputs.replace(concurrency=concurrency or inputs.max_num_seqs)
    return inputs.replace(gpu=measured_gpu(planned, runs, topo))


def _serving_slo(thresholds: Thresholds) -> ServingSlo:
    from infertriage.plan.pdpools import ServingSlo  # noqa: PLC0415  # see the imports

    return ServingSlo(thresholds.ttft_p95_s, thresholds.itl_p95_s)


def _layout(spec: PlanSpec, inputs: PlanInputs, thresholds: Thresholds) -> LayoutChoice | None:
    """DP vs TP vs EP on the GPUs given, when there is more than one and lengths are known."""
    num_gpus = spec.num_gpus or inputs.gpus_per_instance
    if num_gpus < 2 or inputs.input_len is None or inputs.output_len is None:
        return None
    from infertriage.plan.parallel_choice import choose_layout  # noqa: PLC0415

    return choose_layout(inputs, num_gpus, _serving_slo(thresholds), spec.rate)


def _disagg(spec: PlanSpec, inputs: PlanInputs, thresholds: Thresholds) -> DisaggPlan | None:
    """xPyD against colocated for `--rate`."""
    if spec.rate is None:
        return None
    if inputs.input_len is None or inputs.output_len is None:
        raise UserError("--rate sizes prefill and decode: give --input-len and --output-len too.")
    from infertriage.plan.disagg import make_disagg_plan  # noqa: PLC0415  # see the imports
    from infertriage.plan.pdpools import KvLink  # noqa: PLC0415

    link = KvLink(spec.kv_link_gb_s * 1e9, spec.kv_link_latency_s)
    return make_disagg_plan(inputs, spec.rate, _serving_slo(thresholds), link)


def _offload(spec: PlanSpec, capacity: CapacityPlan) -> OffloadPlan | None:
    if spec.offload_gb is None:
        return None
    from infertriage.plan.offload import make_offload_plan  # noqa: PLC0415  # see the imports

    if spec.prefix_reuse is None:
        raise UserError("--offload-gb needs --prefix-reuse: the share of a prompt a prefix covers.")
    return make_offload_plan(capacity, spec.offload_gb * GIB, spec.prefix_reuse, spec.rate)


def _autoscaler_needs_traffic(spec: PlanSpec) -> None:
    """`--hpa` and `--keda` size the autoscaler from a day of traffic: without `--traffic`
    they would write nothing, so they are refused rather than ignored."""
    if spec.traffic is None and (spec.hpa is not None or spec.keda is not None):
        flag = "--keda" if spec.keda is not None else "--hpa"
        raise UserError(f"{flag} sizes the autoscaler from --traffic FILE: give --traffic too.")


def plan(spec: PlanSpec) -> PlanReport:
    """The `plan` command: capacity, headroom, roofline, advice and what-if sweeps."""
    from_run = spec.from_run
    workload = summarize_run_workload(from_run) if from_run is not None else None
    input_len, output_len = spec.input_len, spec.output_len
    concurrency, measured_throughput_tok_s = spec.concurrency, spec.measured_throughput_tok_s
    if workload is not None:
        input_len = input_len or workload.mean_input_len
        output_len = output_len or workload.mean_output_len
        concurrency = concurrency or max(1, round(workload.mean_concurrency))
        measured_throughput_tok_s = measured_throughput_tok_s or _measured_tok_s(workload)
    if concurrency is None and spec.traffic is None:
        raise UserError("--concurrency is required (or --from-run to take it from a run).")
    _autoscaler_needs_traffic(spec)
    num_gpus = spec.num_gpus
    inputs = PlanInputs(
        model=load_model(spec.model),
        gpu=get_gpu(spec.gpu),
        max_model_len=spec.max_model_len,
        concurrency=concurrency or 1,
        input_len=input_len,
        output_len=output_len,
        num_gpus=num_gpus,
        gpus_per_node=spec.gpus_per_node,
        tp=spec.tp,
        pp=spec.pp,
        ep=spec.ep,
        dtype=normalize_dtype(spec.dtype),
        kv_dtype=normalize_dtype(spec.kv_dtype),
        gpu_memory_utilization=spec.gpu_memory_utilization,
        max_num_batched_tokens=spec.max_num_batched_tokens,
    )
    inputs = _with_measured_link(spec, inputs, concurrency)
    traffic = None
    if spec.traffic is not None:  # `--traffic`: YAML, the HPA and `validate`'s checks load here
        from infertriage.api.traffic import traffic_plan  # noqa: PLC0415

        traffic = traffic_plan(spec, inputs)
    if concurrency is None and traffic is not None:  # one replica at the peak's concurrency
        peak = traffic.peak.capacity
        inputs = inputs.replace(
            concurrency=peak.concurrency, input_len=peak.input_len, output_len=peak.output_len
        )
    capacity = make_capacity_plan(inputs)
    thresholds = load_thresholds(spec.slo)
    advice, advice_error = None, ""
    try:
        advice = advise_parallelism(inputs.replace(num_gpus=num_gpus or inputs.gpus_per_instance))
    except UserError as err:
        advice_error = str(err)
    roofline = capacity.roofline
    cost = None
    gpu_hour_cost, measured_itl_s, what_if = spec.gpu_hour_cost, spec.measured_itl_s, spec.what_if
    if gpu_hour_cost is not None:
        per_second = gpu_hour_cost * inputs.gpus_per_instance / 3600.0
        cost = per_second / (measured_throughput_tok_s or roofline.throughput_tok_s) * 1e6
    return PlanReport(
        plan=capacity,
        advice=advice,
        advice_error=advice_error,
        what_if=tuple(sweep(inputs, what_if)) if what_if else (),
        itl_efficiency=roofline.itl_s / measured_itl_s if measured_itl_s else None,
        throughput_efficiency=(
            measured_throughput_tok_s / roofline.throughput_tok_s
            if measured_throughput_tok_s
            else None
        ),
        cost_per_million_output_tokens=cost,
        from_run=workload,
        traffic=traffic,
        layout=_layout(spec, inputs, thresholds),
        disagg=_disagg(spec, inputs, thresholds),
        pipeline=make_pipeline_plan(inputs),
        offload=_offload(spec, capacity),
        replicas_at_rate=_replicas(spec.rate, workload),
    )


def _measured_tok_s(workload: RunWorkload) -> float:
    """A run's output tokens/s; with a goodput search, its max rate's (the replica's
    capacity under the SLOs, at the level's mean output length)."""
    if workload.max_rate is not None:
        return workload.max_rate.rate_rps * workload.mean_output_len
    return workload.output_tok_s


def _replicas(rate: float | None, workload: RunWorkload | None) -> int | None:
    """`--rate` over the run's measured max rate per replica, rounded up."""
    if rate is None or workload is None or workload.max_rate is None:
        return None
    return max(1, math.ceil(rate / workload.max_rate.rate_rps - 1e-9))
