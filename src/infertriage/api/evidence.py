"""api, level 5: evidence that needs a lower stage's heavier machinery — traces and the plan.

Takes the trace files of a run and the deployment; gives the signals the
rules read under their own names: the trace analysis's `trace.*` figures
(which carry the rules' names: analyze.trace.derived) and the roofline's throughput
and ITL at the batch the run reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infertriage.api.topology import Interconnect
from infertriage.api.trace import trace_report
from infertriage.plan import (
    PlanInputs,
    get_gpu,
    load_model,
    make_capacity_plan,
    smallest_replica_tp,
)
from infertriage.plan.topology import measured_gpu
from infertriage.schemas import Deployment, RunServerConfig, Signal, UserError

__all__ = ["plan_signals", "trace_signals"]


def trace_signals(paths: Sequence[Path]) -> list[Signal]:
    """Every trace signal, the derived ones the rules read among them (`derive_rule_signals`);
    no findings: `diagnose` runs the rules once, over these and all its other evidence."""
    if not paths:
        return []
    return list(trace_report(list(paths)).signals)  # diagnose judges them itself, once


def _value(signals: Sequence[Signal], name: str) -> float | None:
    return next((s.value for s in signals if s.name == name), None)


def _fewer_gpus(inputs: PlanInputs) -> list[Signal]:
    smallest = smallest_replica_tp(inputs)
    return [Signal("plan.smallest_tp_that_fits", float(smallest), "GPUs", "plan")]


def _served_batch(measured: Sequence[Signal], batch: int) -> float:
    """The plan's batch, or fewer: the requests in flight on average where the client measured
    it (decode time barely grows with the batch, so the ceiling scales with it)."""
    mean = _value(measured, "client.mean_concurrency")
    return batch if mean is None or mean <= 0 else min(float(batch), mean)


def plan_signals(
    deployment: Deployment,
    server_config: RunServerConfig,
    measured: Sequence[Signal],
    interconnect: Interconnect | None = None,
) -> list[Signal]:
    """The roofline at the batch and prompt length the run reached, when the deployment is known;
    on the measured interconnect (`--nvidia-smi-topo`, `--nccl-tests`) when given."""
    model, gpu = deployment.model, deployment.gpu
    batch = _value(measured, "client.max_concurrency")
    if model is None or gpu is None or not batch:
        return []
    prompt = int(_value(measured, "client.mean_prompt_tokens") or 512)
    output = int(_value(measured, "client.mean_output_tokens") or 256)
    max_len = server_config.max_model_len or deployment.max_model_len or 8192
    try:
        inputs = PlanInputs(
            model=load_model(model),
            gpu=get_gpu(gpu),
            max_model_len=max_len,
            concurrency=max(1, int(batch)),
            input_len=min(prompt, max_len - 1),
            output_len=max(1, min(output, max_len - prompt)),
            tp=deployment.tensor_parallel or 1,
            dtype=deployment.dtype or "bf16",
            interconnect=deployment.interconnect or "auto",
        )
        if interconnect is not None:
            topo, runs = interconnect
            inputs = inputs.replace(gpu=measured_gpu(inputs, runs, topo))
        plan = make_capacity_plan(inputs)
    except UserError:
        return []
    r = plan.roofline
    extra = _fewer_gpus(plan.inputs)
    pcie = _value(measured, "gpu.pcie_bytes_per_s")
    if pcie is not None:
        share = pcie / plan.inputs.gpu.pcie_bw_bytes_per_s
        extra.append(Signal("gpu.pcie_utilization", share, "fraction", "metrics+plan"))
    # A request of the run holds its seat for its prefill and all its decode steps; the
    # ceiling is the batch's, at the requests in flight on average over the window the
    # throughput was measured in (a short level's drain holds a third of the peak)
    per_request_s = r.ttft_s + output * r.itl_s
    ceiling = _served_batch(measured, r.batch_size) * output / per_request_s
    return [
        *extra,
        Signal("plan.throughput_roofline_tok_s", ceiling, "tokens/s", "plan"),
        Signal("plan.decode_itl_roofline_s", r.itl_s, "s", "plan"),
        Signal("plan.decode_batch", float(r.batch_size), "requests", "plan"),
        Signal("plan.tokens_per_request", float(plan.inputs.tokens_per_request), "tokens", "plan"),
        Signal("plan.memory_headroom", plan.free_fraction, "fraction", "plan"),
    ]
