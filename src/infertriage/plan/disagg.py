"""plan, level 1: prefill/decode disaggregation (xPyD) against colocated serving, for a rate.

Takes `PlanInputs` (model, GPU, prompt and output lengths, headroom, engine knobs), a rate
in requests/s, the SLOs (`ServingSlo`) and the KV link (`KvLink`); gives a `DisaggPlan`:
`x` prefill and `y` decode instances, each pool at the TP degree that needs the fewest GPUs
for the rate with the headroom kept (`plan.pdpools` prices one instance of each), and the
best colocated deployment for the same rate and SLOs (the TP and prefill chunk that need the
fewest GPUs), with which one wins and why in one sentence. Ties go to colocated: one pool is
simpler to run than two and a link. Pure functions over the roofline; no figure of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeVar

from infertriage.plan.advice import fits_one_request, tp_candidates
from infertriage.plan.capacity import PlanInputs
from infertriage.plan.memory import kv_bytes_per_token
from infertriage.plan.pdpools import (
    ColocatedInstance,
    DecodeInstance,
    KvLink,
    PrefillInstance,
    ServingSlo,
    colocated_instance,
    decode_instance,
    prefill_instance,
)
from infertriage.schemas.errors import UserError
from infertriage.schemas.units import format_seconds as _ms

__all__ = ["DisaggPlan", "Pool", "make_disagg_plan"]

_T = TypeVar("_T")
Winner = Literal["disaggregated", "colocated", "neither"]
_SMALLEST_CHUNK = 256  # chunked prefill's smallest budget worth trying (vLLM's floor is 1 block)


@dataclass(frozen=True, slots=True)
class Pool:
    """Instances of one kind for the rate: how many, at which TP, what each serves."""

    instances: int
    tp: int
    capacity_req_s: float  # one instance's, before the headroom
    utilisation: float  # of the pool's capacity at the rate

    @property
    def gpus(self) -> int:
        return self.instances * self.tp


@dataclass(frozen=True, slots=True)
class DisaggPlan:
    rate: float  # requests/s
    input_len: int
    output_len: int
    slo: ServingSlo
    link: KvLink
    headroom: float
    kv_bytes_per_token: int  # the whole model's, all ranks (what crosses the link)
    prefill: PrefillInstance | None
    decode: DecodeInstance | None
    prefill_pool: Pool | None
    decode_pool: Pool | None
    colocated: ColocatedInstance | None
    colocated_pool: Pool | None
    winner: Winner
    reason: str

    @property
    def gpus(self) -> int | None:
        """GPUs of the xPyD deployment (None: no disaggregated deployment meets the SLOs)."""
        if self.prefill_pool is None or self.decode_pool is None:
            return None
        return self.prefill_pool.gpus + self.decode_pool.gpus

    @property
    def colocated_gpus(self) -> int | None:
        return None if self.colocated_pool is None else self.colocated_pool.gpus

    @property
    def name(self) -> str:
        """`2P4D`, with each pool's TP where it is above 1: `2P(TP2)4D`."""
        if self.prefill_pool is None or self.decode_pool is None:
            return "none"
        p, d = self.prefill_pool, self.decode_pool
        p_tp = f"(TP{p.tp})" if p.tp > 1 else ""
        d_tp = f"(TP{d.tp})" if d.tp > 1 else ""
        return f"{p.instances}P{p_tp}{d.instances}D{d_tp}"


def _pool(rate: float, capacity: float, tp: int, headroom: float) -> Pool:
    instances = max(1, math.ceil(rate / (capacity * (1 - headroom)) - 1e-9))
    return Pool(instances, tp, capacity, rate / (instances * capacity))


def _tps(inputs: PlanInputs) -> list[int]:
    """TP degrees inside one node at which the model and one full request fit."""
    return [
        tp
        for tp in tp_candidates(inputs, inputs.gpus_per_node)
        if fits_one_request(inputs.replace(tp=tp, pp=1))
    ]


def _cheapest(options: list[tuple[Pool, _T]]) -> tuple[Pool, _T] | None:
    """The option needing the fewest GPUs; of those, the least loaded (the smaller TP first)."""
    if not options:
        return None
    return min(options, key=lambda o: (o[0].gpus, o[0].utilisation, o[0].tp))


def _decode_side(
    inputs: PlanInputs, rate: float, slo: ServingSlo, link: KvLink, tps: list[int]
) -> tuple[Pool, DecodeInstance] | None:
    options = []
    for tp in tps:
        one = decode_instance(inputs.replace(tp=tp), slo, link)
        if one is not None:
            options.append((_pool(rate, one.capacity_req_s, tp, inputs.headroom), one))
    return _cheapest(options)


def _prefill_side(
    inputs: PlanInputs, rate: float, slo: ServingSlo, link: KvLink, first_token_s: float
) -> tuple[Pool, PrefillInstance] | None:
    options = []
    for tp in _tps(inputs):
        one = prefill_instance(inputs.replace(tp=tp), slo, link, first_token_s)
        if one is not None:
            options.append((_pool(rate, one.capacity_req_s, tp, inputs.headroom), one))
    return _cheapest(options)


def _chunks(inputs: PlanInputs) -> list[int]:
    """Prefill chunks a colocated engine may run with: the budget, and halvings of it."""
    budget, prompt = inputs.max_num_batched_tokens, inputs.input_len or 1
    chunks = {min(budget, prompt)}
    size = budget
    while size >= _SMALLEST_CHUNK:
        chunks.add(min(size, prompt))
        size //= 2
    return sorted(chunks, reverse=True)


def _colocated_side(
    inputs: PlanInputs, rate: float, slo: ServingSlo, tps: list[int]
) -> tuple[Pool, ColocatedInstance] | None:
    options = []
    for tp in tps:
        for chunk in _chunks(inputs):
            one = colocated_instance(inputs.replace(tp=tp), slo, chunk)
            if one is not None:
                options.append((_pool(rate, one.capacity_req_s, tp, inputs.headroom), one))
    return _cheapest(options)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _colocated_limit(one: ColocatedInstance, slo: ServingSlo) -> str:
    """Why one colocated replica serves no more: its limit in words, with the figures."""
    if one.limited_by.startswith("ITL SLO (prefill"):
        return (
            f"prefill chunks of {one.chunk_tokens} tokens stretch decode steps from "
            f"{_ms(one.decode_step_s)} to {_ms(one.mixed_step_s)}, over the ITL SLO "
            f"({_ms(slo.itl_s)}) once more than {1 - slo.quantile:.0%} of steps carry one, "
            f"so a colocated replica serves only {one.capacity_req_s:.2f} req/s"
        )
    if one.limited_by.startswith("TPOT"):
        return (
            f"prefill chunks of {one.chunk_tokens} tokens stretch {one.mixed_share:.0%} of decode "
            f"steps from {_ms(one.decode_step_s)} to {_ms(one.mixed_step_s)}, so the mean time "
            f"per output token reaches the ITL limit ({_ms(slo.itl_s)}) at "
            f"{one.capacity_req_s:.2f} req/s per replica"
        )
    if one.limited_by == "TTFT SLO":
        return (
            f"its prompts queue behind each other and the decode batch: TTFT reaches the SLO "
            f"({_ms(slo.ttft_s)}) at {one.capacity_req_s:.2f} req/s per replica"
        )
    return (
        f"a colocated replica is limited by its {one.limited_by} at {one.capacity_req_s:.2f} req/s"
    )


def _verdict(
    split: tuple[Pool, Pool] | None,
    colocated: tuple[Pool, ColocatedInstance] | None,
    slo: ServingSlo,
) -> tuple[Winner, str]:
    """Which deployment needs fewer GPUs for the rate, and why, in one sentence."""
    if split is None and colocated is None:
        return "neither", (
            "no deployment meets these SLOs inside one node: one request alone misses them; "
            "use a faster GPU, a smaller model or a looser --slo."
        )
    if split is None:
        return "colocated", "no disaggregated pool meets the SLOs (one prompt alone misses them)."
    gpus = split[0].gpus + split[1].gpus
    if colocated is None:
        return "disaggregated", (
            f"no colocated replica meets the SLOs: a prompt's prefill beside the decode batch "
            f"breaks them; {_gpus(gpus)} split into prefill and decode do."
        )
    pool, one = colocated
    if gpus < pool.gpus:
        return "disaggregated", (
            f"{_gpus(gpus)} against {pool.gpus} colocated: {_colocated_limit(one, slo)}; "
            "decode instances run no prefill, so they keep their batch within the ITL SLO."
        )
    idle = min(split[0].utilisation, split[1].utilisation)
    return "colocated", (
        f"{_gpus(pool.gpus)} against {gpus} split: a colocated replica meets the SLOs with "
        f"prefill in {one.mixed_share:.0%} of its steps (ITL {_ms(one.itl_s)}), and at this "
        f"rate the lighter pool of the split would be {idle:.0%} busy; splitting buys no GPU "
        "and adds a KV transfer to every request."
    )


def make_disagg_plan(inputs: PlanInputs, rate: float, slo: ServingSlo, link: KvLink) -> DisaggPlan:
    """xPyD and the best colocated deployment for `rate` requests/s within `slo`."""
    if inputs.input_len is None or inputs.output_len is None:
        raise UserError("sizing prefill and decode needs --input-len and --output-len.")
    if rate <= 0:
        raise UserError(f"--rate must be a positive number, not {rate}.")
    tps = _tps(inputs)
    if not tps:
        raise UserError(
            f"{inputs.model.name} does not fit one node's {inputs.gpus_per_node} GPUs with one "
            f"request of {inputs.max_model_len} tokens: P/D sizing needs it inside one node."
        )
    decode = _decode_side(inputs, rate, slo, link, tps)
    first_token_s = decode[1].itl_s if decode is not None else 0.0
    prefill = _prefill_side(inputs, rate, slo, link, first_token_s) if decode else None
    colocated = _colocated_side(inputs, rate, slo, tps)
    split = (prefill[0], decode[0]) if prefill and decode else None
    winner, reason = _verdict(split, colocated, slo)
    return DisaggPlan(
        rate=rate,
        input_len=inputs.input_len,
        output_len=inputs.output_len,
        slo=slo,
        link=link,
        headroom=inputs.headroom,
        kv_bytes_per_token=kv_bytes_per_token(inputs.model, inputs.kv_dtype, 1),
        prefill=prefill[1] if prefill else None,
        decode=decode[1] if decode else None,
        prefill_pool=prefill[0] if prefill else None,
        decode_pool=decode[0] if decode else None,
        colocated=colocated[1] if colocated else None,
        colocated_pool=colocated[0] if colocated else None,
        winner=winner,
        reason=reason,
    )
