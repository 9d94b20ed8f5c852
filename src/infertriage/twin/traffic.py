"""twin, level 2: the requests `simulate` sends: arrival times, prompt tokens, output lengths.

Takes a rate, a request count, optional fixed input/output lengths, the arrival
process and a seed; gives a list of frozen `TrafficRequest`s. Without fixed
lengths it draws DESIGN's synthetic chat mix: prompts log-normal with median 512
and p90 2,048 tokens, outputs log-normal with median 256 (σ = 0.8, p90 ≈ 715),
and 20 % of requests opening with the same 1,024-token system prefix before their
own message; whole prompts are capped at half of `max_model_len`, outputs at what
is left of it. With a fixed `input_len` prompts are random tokens (no shared
prefix), as in vLLM's random benchmark dataset. Arrivals are Poisson (seeded
exponential gaps) or evenly spaced at `rate` requests per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["ArrivalProcess", "TrafficRequest", "make_traffic"]

ArrivalProcess = Literal["poisson", "constant"]

_PROMPT_MEDIAN = 512
_PROMPT_P90 = 2048
_OUTPUT_MEDIAN = 256
_OUTPUT_SIGMA = 0.8
_PREFIX_SHARE = 0.2
_PREFIX_TOKENS = 1024
_Z90 = 1.2815515655446004


@dataclass(frozen=True, slots=True)
class TrafficRequest:
    request_id: str
    arrival_ts: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    shares_prefix: bool = False


def _arrivals(
    rng: np.random.Generator, rate: float, count: int, process: ArrivalProcess
) -> list[float]:
    if process == "constant":
        return [i / rate for i in range(count)]
    gaps = rng.exponential(1.0 / rate, size=count)
    gaps[0] = 0.0
    times: list[float] = np.cumsum(gaps).tolist()
    return times


def _lognormal(rng: np.random.Generator, median: float, sigma: float, count: int) -> np.ndarray:
    return np.rint(rng.lognormal(math.log(median), sigma, size=count))


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
    rng = np.random.default_rng(seed)
    times = _arrivals(rng, rate, num_requests, arrivals)
    cap = max(1, max_model_len // 2)
    if input_len is not None:
        lengths = np.full(num_requests, input_len)
        shared = np.zeros(num_requests, dtype=bool)
    else:
        sigma = math.log(_PROMPT_P90 / _PROMPT_MEDIAN) / _Z90
        lengths = _lognormal(rng, _PROMPT_MEDIAN, sigma, num_requests)
        shared = rng.random(num_requests) < _PREFIX_SHARE
        lengths = np.where(shared & (cap > _PREFIX_TOKENS), lengths + _PREFIX_TOKENS, lengths)
        lengths = np.clip(lengths, 1, cap)
    if output_len is not None:
        outputs = np.full(num_requests, output_len)
    else:
        outputs = np.clip(_lognormal(rng, _OUTPUT_MEDIAN, _OUTPUT_SIGMA, num_requests), 1, None)
    prefix = rng.integers(0, vocab_size, size=_PREFIX_TOKENS).tolist()
    requests = []
    for i in range(num_requests):
        length = int(lengths[i])
        own = rng.integers(0, vocab_size, size=length).tolist()
        uses_prefix = bool(shared[i]) and length > _PREFIX_TOKENS
        tokens = prefix + own[_PREFIX_TOKENS:] if uses_prefix else own
        room = max(1, max_model_len - length)
        requests.append(
            TrafficRequest(
                request_id=f"sim-{i}",
                arrival_ts=float(times[i]),
                prompt_token_ids=tuple(tokens),
                max_tokens=int(min(outputs[i], room)),
                shares_prefix=uses_prefix,
            )
        )
    return requests
