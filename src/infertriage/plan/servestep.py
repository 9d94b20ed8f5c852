"""plan, level 1: the pieces a serving plan prices one instance with, from the roofline.

Takes `PlanInputs` at a tensor-parallel degree; gives the time of a decode step of a batch
(`decode_s`), of a prefill of prompts batched in one step or chunked over several
(`prefill_s`), of a colocated engine's mixed step (a decode batch plus a prefill chunk in one
forward pass, as chunked prefill runs it: `mixed_s`), the largest decode batch whose step
meets a limit (`batch_within`), the KV blocks' bound on the batch with the headroom kept
(`kv_batch_limit`), and a queue's waiting time at a percentile (`queue_wait_s`). Every time
is the cost model's (`plan.roofline`); nothing here is a fitted figure of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from infertriage.plan.capacity import PlanInputs, interconnect_of, make_capacity_plan
from infertriage.plan.roofline import (
    StepCost,
    decode_step_time,
    prefill_time,
    step_allreduce_s,
    step_cost,
    step_work,
)
from infertriage.schemas.errors import UserError

__all__ = [
    "batch_within",
    "decode_context",
    "decode_s",
    "kv_batch_limit",
    "largest_batch",
    "max_utilisation",
    "mixed_s",
    "prefill_s",
    "prefill_step_s",
    "queue_wait_s",
]


def decode_context(inputs: PlanInputs) -> int:
    """The mean context of a decoding sequence: its prompt and half its output."""
    prompt, output = inputs.input_len or 1, inputs.output_len or 1
    return min(inputs.max_model_len, prompt + output // 2)


def _decode_step(inputs: PlanInputs, batch: int) -> StepCost:
    return decode_step_time(
        inputs.model,
        inputs.gpu,
        inputs.dtype,
        max(1, batch),
        decode_context(inputs),
        tp=inputs.tp,
        kv_dtype=inputs.kv_dtype,
        params=inputs.cost_params,
        interconnect=interconnect_of(inputs),
    )


def _prefill_step(inputs: PlanInputs, tokens: int, *, before: int = 0, seqs: int = 1) -> StepCost:
    return prefill_time(
        inputs.model,
        inputs.gpu,
        inputs.dtype,
        tokens,
        tp=inputs.tp,
        kv_dtype=inputs.kv_dtype,
        params=inputs.cost_params,
        context_before=before,
        interconnect=interconnect_of(inputs),
        num_seqs=seqs,
    )


def decode_s(inputs: PlanInputs, batch: int) -> float:
    """One decode step of `batch` sequences at the mean decode context."""
    return _decode_step(inputs, batch).total_s


def prefill_step_s(inputs: PlanInputs, tokens: int, *, before: int = 0, seqs: int = 1) -> float:
    """One prefill step of `tokens` prompt tokens over `seqs` prompts, after `before`."""
    return _prefill_step(inputs, tokens, before=before, seqs=seqs).total_s


def prefill_s(inputs: PlanInputs, num_prompts: int = 1) -> float:
    """Prefill `num_prompts` prompts of `input_len` tokens: one step when they fit the token
    budget (`max_num_batched_tokens`), else one prompt in budget-sized chunks, one per step."""
    prompt, budget = inputs.input_len or 1, inputs.max_num_batched_tokens
    if prompt <= budget:
        return prefill_step_s(inputs, prompt, seqs=num_prompts)
    total, done = 0.0, 0
    while done < prompt:
        chunk = min(budget, prompt - done)
        total, done = total + prefill_step_s(inputs, chunk, before=done), done + chunk
    return total * num_prompts


def mixed_s(inputs: PlanInputs, batch: int, chunk: int) -> float:
    """One colocated step: `batch` decoding sequences and a prefill chunk of `chunk` prompt
    tokens (the chunk's attention at the middle of the prompt) through one forward pass."""
    if chunk <= 0:
        return decode_s(inputs, batch)
    prompt = inputs.input_len or chunk
    before = max(0, min(prompt - chunk, prompt // 2 - chunk // 2))
    dec = _decode_step(inputs, batch).work
    pre = _prefill_step(inputs, chunk, before=before).work
    tokens = max(1, batch) + chunk
    work = step_work(
        inputs.model,
        inputs.dtype,
        tp=inputs.tp,
        num_tokens=tokens,
        num_logit_tokens=max(1, batch) + 1,
        num_seqs=max(1, batch) + 1,
        prefill_attention_flops=pre.prefill_attention_flops,
        decode_attention_flops=dec.decode_attention_flops,
        kv_bytes=pre.kv_bytes + dec.kv_bytes,
        comm_s=step_allreduce_s(
            inputs.model,
            gpu=inputs.gpu,
            tp=inputs.tp,
            num_tokens=tokens,
            params=inputs.cost_params,
            interconnect=interconnect_of(inputs),
        ),
    )
    return step_cost(work, inputs.gpu, inputs.dtype, inputs.cost_params).total_s


def kv_batch_limit(inputs: PlanInputs) -> int:
    """Requests of `input_len + output_len` tokens one instance holds with the headroom kept
    (0 when the model leaves no KV cache), capped by `max_num_seqs`."""
    try:
        plan = make_capacity_plan(inputs.replace(concurrency=1, num_gpus=None))
    except UserError:
        return 0
    return min(plan.max_concurrency, inputs.max_num_seqs)


def largest_batch(step_at: Callable[[int], float], limit_s: float, ceiling: int) -> int:
    """The largest batch up to `ceiling` whose step (`step_at`, growing with the batch) takes
    at most `limit_s` (0: none)."""
    if ceiling < 1 or step_at(1) > limit_s:
        return 0
    if step_at(ceiling) <= limit_s:
        return ceiling
    low, high = 1, ceiling
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if step_at(middle) <= limit_s else (low, middle)
    return low


def batch_within(inputs: PlanInputs, limit_s: float, ceiling: int) -> int:
    """The largest decode batch up to `ceiling` whose step takes at most `limit_s` (0: none)."""
    return largest_batch(lambda batch: decode_s(inputs, batch), limit_s, ceiling)


def queue_wait_s(utilisation: float, service_s: float, quantile: float) -> float:
    """The wait before service at `quantile` of a single server busy `utilisation` of the
    time: M/M/1's `s / (1 − u) · ln(u / (1 − q))` (0 while u ≤ 1 − q). Exponential service
    is the conservative reading of an engine whose steps vary; infinite at u ≥ 1."""
    if utilisation >= 1:
        return math.inf
    if utilisation <= 1 - quantile or utilisation <= 0:
        return 0.0
    return service_s / (1 - utilisation) * math.log(utilisation / (1 - quantile))


def max_utilisation(service_s: float, slack_s: float, quantile: float) -> float:
    """The largest utilisation whose `queue_wait_s` at `quantile` fits in `slack_s` (0: none)."""
    if slack_s < 0:
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(40):
        middle = (low + high) / 2
        if queue_wait_s(middle, service_s, quantile) <= slack_s:
            low = middle
        else:
            high = middle
    return low
