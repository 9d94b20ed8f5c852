"""plan, level 1: what one prefill, one decode and one colocated instance each serve within SLOs.

Takes `PlanInputs` (the instance's model, GPU, TP, prompt and output lengths, engine knobs),
the SLOs (`ServingSlo`: TTFT and ITL limits at a percentile) and, for prefill, the KV link
(`KvLink`); gives the instance's capacity in requests/s with what limits it:

- a **prefill** instance (`prefill_instance`) runs prompts only, `k` per step where they fit
  the token budget; a prompt waits in its queue (at the SLO's percentile), is prefilled, its
  KV cache crosses the link to a decode instance, which emits the first token: TTFT is the
  sum. Its rate is the largest that keeps that TTFT within the SLO and the link's bytes
  within its bandwidth (one NIC per GPU: each rank sends its shard).
- a **decode** instance (`decode_instance`) runs the largest batch whose step meets the ITL
  SLO and whose requests fit its KV cache with the headroom kept; a request holds its slot
  for the transfer and its output.
- a **colocated** instance (`colocated_instance`) runs both with chunked prefill: a prompt
  rides `ceil(prompt / chunk)` steps beside the decode batch, and those mixed steps are
  slower. When more than `1 − percentile` of the steps are mixed, the ITL at the SLO's
  percentile is the mixed step's: prefill interference; and the mean time per output token
  (TPOT) counts every mixed step, so it must meet the per-token limit too. Its rate is the
  largest whose batch (Little's law), TTFT, ITL, TPOT and KV cache all hold.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from infertriage.plan.capacity import PlanInputs
from infertriage.plan.memory import kv_bytes_per_token
from infertriage.plan.servestep import (
    batch_within,
    decode_s,
    kv_batch_limit,
    max_utilisation,
    mixed_s,
    prefill_s,
    queue_wait_s,
)

__all__ = [
    "ColocatedInstance",
    "DecodeInstance",
    "KvLink",
    "PrefillInstance",
    "ServingSlo",
    "colocated_instance",
    "decode_instance",
    "kv_transfer_s",
    "prefill_instance",
]

_FIXED_POINT_ROUNDS = 30
_BISECTION_ROUNDS = 30


@dataclass(frozen=True, slots=True)
class ServingSlo:
    """The limits an instance must meet: TTFT and ITL (per output token) at `quantile`."""

    ttft_s: float
    itl_s: float
    quantile: float = 0.95  # the SLOs are p95 (`Thresholds.ttft_p95_s`, `itl_p95_s`)


@dataclass(frozen=True, slots=True)
class KvLink:
    """The link a prompt's KV cache crosses from a prefill to a decode instance, per GPU."""

    bandwidth_bytes_per_s: float
    latency_s: float  # per transfer: the connector's handshake and first byte


@dataclass(frozen=True, slots=True)
class PrefillInstance:
    tp: int
    prompts_per_step: int
    step_s: float  # one prefill step of `prompts_per_step` prompts
    transfer_s: float  # one prompt's KV cache over the link
    ttft_s: float  # at the SLO's percentile, at `capacity_req_s`
    capacity_req_s: float
    limited_by: str  # "TTFT SLO" or "KV link"


@dataclass(frozen=True, slots=True)
class DecodeInstance:
    tp: int
    batch: int  # sequences per step
    itl_s: float
    capacity_req_s: float
    limited_by: str  # "ITL SLO", "KV cache with headroom" (max-num-seqs counted in it)


@dataclass(frozen=True, slots=True)
class ColocatedInstance:
    tp: int
    chunk_tokens: int  # the prefill chunk (`--max-num-batched-tokens` minus the decodes)
    batch: int  # sequences decoding at `capacity_req_s` (Little's law)
    decode_step_s: float
    mixed_step_s: float
    mixed_share: float  # of the steps, those carrying a prefill chunk
    itl_s: float  # at the SLO's percentile
    tpot_s: float  # mean time per output token
    ttft_s: float  # at the SLO's percentile
    capacity_req_s: float
    # "ITL SLO (prefill interference)", "TPOT (prefill interference)", "ITL SLO", "TTFT SLO",
    # "KV cache with headroom" or "compute"
    limited_by: str


def kv_transfer_s(inputs: PlanInputs, link: KvLink) -> float:
    """One prompt's KV cache from a prefill instance at `inputs.tp` to a decode instance:
    each rank sends its shard over its own NIC, so the time is one shard's."""
    shard = (inputs.input_len or 1) * kv_bytes_per_token(inputs.model, inputs.kv_dtype, inputs.tp)
    return link.latency_s + shard / link.bandwidth_bytes_per_s


def decode_instance(inputs: PlanInputs, slo: ServingSlo, link: KvLink) -> DecodeInstance | None:
    """A decode instance at `inputs.tp`: its largest batch within the ITL SLO and its KV
    cache, and the requests/s it then serves (None: one sequence misses the SLO or no
    request fits)."""
    ceiling = kv_batch_limit(inputs)
    batch = batch_within(inputs, slo.itl_s, ceiling)
    if batch < 1:
        return None
    step = decode_s(inputs, batch)
    output = inputs.output_len or 1
    held_s = (output - 1) * step + kv_transfer_s(inputs, link)
    return DecodeInstance(
        tp=inputs.tp,
        batch=batch,
        itl_s=step,
        capacity_req_s=batch / max(held_s, step),
        limited_by="KV cache with headroom" if batch == ceiling else "ITL SLO",
    )


def prefill_instance(
    inputs: PlanInputs, slo: ServingSlo, link: KvLink, first_token_s: float
) -> PrefillInstance | None:
    """A prefill instance at `inputs.tp` whose TTFT (queue, prefill, KV transfer and the
    decode instance's first step, `first_token_s`) meets the SLO: the best number of
    prompts per step and its requests/s (None: one prompt alone misses the TTFT SLO)."""
    if kv_batch_limit(inputs) < 1:
        return None
    prompt = inputs.input_len or 1
    transfer = kv_transfer_s(inputs, link)
    shard_bytes = prompt * kv_bytes_per_token(inputs.model, inputs.kv_dtype, inputs.tp)
    link_cap = link.bandwidth_bytes_per_s / shard_bytes
    overhead = inputs.cost_params.request_overhead_s
    best: PrefillInstance | None = None
    most = max(1, min(inputs.max_num_seqs, inputs.max_num_batched_tokens // prompt))
    for k in sorted({1, *(2**i for i in range(1, 12) if 2**i <= most), most}):
        step = prefill_s(inputs, k)
        slack = slo.ttft_s - (overhead + step + transfer + first_token_s)
        if slack < 0:
            continue
        utilisation = max_utilisation(step, slack, slo.quantile)
        rate, limited = utilisation * k / step, "TTFT SLO"
        if rate > link_cap:
            rate, limited = link_cap, "KV link"
        if best is None or rate > best.capacity_req_s:
            wait = queue_wait_s(rate * step / k, step, slo.quantile)
            ttft = overhead + wait + step + transfer + first_token_s
            best = PrefillInstance(inputs.tp, k, step, transfer, ttft, rate, limited)
    return best


@dataclass(frozen=True, slots=True)
class _Load:
    """A colocated instance at one rate: its steady state."""

    batch: float
    decode_step_s: float
    mixed_step_s: float
    mixed_share: float
    itl_s: float
    tpot_s: float
    ttft_s: float
    failed: str  # the first limit it breaks, "" when none


def _colocated_load(inputs: PlanInputs, slo: ServingSlo, chunk: int, rate: float) -> _Load:
    """The steady state at `rate` req/s: the batch and the step times, found together (the
    batch sets the steps, the steps set the batch through Little's law)."""
    prompt, output = inputs.input_len or 1, inputs.output_len or 1
    steps_per_prompt = math.ceil(prompt / chunk)
    overhead = inputs.cost_params.request_overhead_s
    ceiling = kv_batch_limit(inputs)
    batch = 1.0
    load = _Load(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, "")
    for _ in range(_FIXED_POINT_ROUNDS):
        seats = max(1, math.ceil(batch))
        t_decode = decode_s(inputs, seats)
        t_mixed = mixed_s(inputs, seats, min(prompt, chunk))
        mixed_per_s = rate * steps_per_prompt
        busy = mixed_per_s * t_mixed  # share of the time in mixed steps
        if busy >= 1:
            return _Load(batch, t_decode, t_mixed, 1.0, t_mixed, t_mixed, math.inf, "compute")
        steps_per_s = mixed_per_s + (1 - busy) / t_decode
        share = mixed_per_s / steps_per_s
        service = steps_per_prompt * t_mixed
        ttft = overhead + t_decode + service + queue_wait_s(busy, service, slo.quantile)
        itl = t_mixed if share > 1 - slo.quantile else t_decode
        tpot = 1 / steps_per_s
        load = _Load(batch, t_decode, t_mixed, share, itl, tpot, ttft, "")
        settled = rate * (ttft + (output - 1) * tpot)
        if abs(settled - batch) < 0.01 * batch + 0.01:
            break
        batch = settled
    failed = ""
    if load.batch > ceiling:
        failed = "KV cache with headroom"
    elif load.itl_s > slo.itl_s or load.tpot_s > slo.itl_s:
        failed = "ITL SLO (prefill interference)" if load.itl_s > load.decode_step_s else "ITL SLO"
        if load.itl_s <= slo.itl_s:
            failed = "TPOT (prefill interference)"
    elif load.ttft_s > slo.ttft_s:
        failed = "TTFT SLO"
    return dataclasses.replace(load, failed=failed)


def colocated_instance(inputs: PlanInputs, slo: ServingSlo, chunk: int) -> ColocatedInstance | None:
    """A colocated instance at `inputs.tp` running prefill in chunks of `chunk` tokens: the
    largest rate whose steady state meets the SLOs and the KV cache (None: none does)."""
    if kv_batch_limit(inputs) < 1 or _colocated_load(inputs, slo, chunk, 1e-9).failed:
        return None
    prompt = inputs.input_len or 1
    # the prefill alone saturates the instance beyond this rate
    high = 1 / (math.ceil(prompt / chunk) * mixed_s(inputs, 1, min(prompt, chunk)))
    low = 0.0
    for _ in range(_BISECTION_ROUNDS):
        middle = (low + high) / 2
        if _colocated_load(inputs, slo, chunk, middle).failed:
            high = middle
        else:
            low = middle
    if low <= 0:
        return None
    load = _colocated_load(inputs, slo, chunk, low)
    above = _colocated_load(inputs, slo, chunk, high).failed or "compute"
    return ColocatedInstance(
        tp=inputs.tp,
        chunk_tokens=chunk,
        batch=max(1, math.ceil(load.batch)),
        decode_step_s=load.decode_step_s,
        mixed_step_s=load.mixed_step_s,
        mixed_share=load.mixed_share,
        itl_s=load.itl_s,
        tpot_s=load.tpot_s,
        ttft_s=load.ttft_s,
        capacity_req_s=low,
        limited_by=above,
    )
