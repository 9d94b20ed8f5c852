"""twin, level 2: the requests `simulate` sends, drawn from the `workload` library.

Takes a rate, a request count, optional fixed input/output lengths, the arrival
process and a seed; gives a list of frozen `TrafficRequest`s. The traffic is the
`workload` library's, so `simulate` sends what `bench` and `diagnose` send under
the same name: without fixed lengths `chat-mix` (DESIGN's synthetic chat mix:
prompts log-normal with median 512 and p90 2,048 tokens, capped at half of
`max_model_len`; outputs log-normal with median 256 and p90 1,024; 20 % of
requests opening with one shared 1,024-token system prefix inside their prompt
length), with a fixed `input_len` `synthetic:input=N` (no shared prefix, the chat
mix's outputs unless `output_len` is fixed too). Arrivals are `workload.arrivals`'
Poisson or constant offsets at `rate` requests per second, the first at 0.

Token ids: each `SynthText` of a spec becomes `num_tokens` ids drawn from a
generator seeded by its key, so equal text gives equal ids (the shared prefix
hits the prefix cache) and the lengths are exactly the workload's. Outputs are
capped at what the context leaves after the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from infertriage.workload import (
    CHAT_MIX_OUTPUT,
    ArrivalKind,
    Arrivals,
    RequestSpec,
    SynthText,
    WorkloadSpec,
    make_schedule,
    parse_workload,
)

__all__ = ["ArrivalProcess", "TrafficRequest", "make_traffic", "traffic_workload"]

ArrivalProcess = Literal["poisson", "constant"]


@dataclass(frozen=True, slots=True)
class TrafficRequest:
    request_id: str
    arrival_ts: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    shares_prefix: bool = False


def traffic_workload(input_len: int | None, output_len: int | None) -> WorkloadSpec:
    """The workload `simulate`'s length options name: the chat mix, or fixed lengths."""
    if input_len is None:
        return parse_workload("chat-mix" if output_len is None else f"chat-mix,output={output_len}")
    output = CHAT_MIX_OUTPUT if output_len is None else str(output_len)
    return parse_workload(f"synthetic:input={input_len},output={output}")


def _token_ids(spec: RequestSpec, vocab_size: int) -> tuple[int, ...]:
    ids: list[int] = []
    for turn in spec.turns:
        content = turn.content
        if isinstance(content, SynthText):
            rng = np.random.default_rng(content.key & 0xFFFF_FFFF_FFFF_FFFF)
            ids.extend(rng.integers(0, vocab_size, content.num_tokens).tolist())
    return tuple(ids)


def make_traffic(
    *,
    rate: float,
    num_requests: int,
    max_model_len: int,
    vocab_size: int,
    input_len: int | None = None,
    output_len: int | None = None,
    arrivals: ArrivalProcess = "poisson",
    seed: int = 0,
) -> list[TrafficRequest]:
    """`num_requests` requests at `rate` req/s; lengths fixed where given, else the chat mix."""
    if rate <= 0 or num_requests < 1:
        raise ValueError("rate must be positive and num_requests at least 1")
    schedule = make_schedule(
        traffic_workload(input_len, output_len),
        Arrivals(ArrivalKind(arrivals), rate),
        num_requests=num_requests,
        duration_s=None,
        seed=seed,
        max_model_len=max_model_len,
    )
    assert schedule.offsets_s is not None  # an open loop
    requests = []
    for spec, offset in zip(schedule.specs, schedule.offsets_s.tolist(), strict=True):
        tokens = _token_ids(spec, vocab_size)
        room = max(1, max_model_len - len(tokens))
        requests.append(
            TrafficRequest(
                request_id=f"sim-{spec.index}",
                arrival_ts=float(offset),
                prompt_token_ids=tokens,
                max_tokens=min(spec.max_tokens, room),
                shares_prefix=("prefix", "shared") in spec.labels,
            )
        )
    return requests
