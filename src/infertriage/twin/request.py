"""twin, level 2: one request inside the engine, its sampling limits and its timings.

Takes what `EngineCore.add_request` is given (id, prompt token ids, `SamplingParams`);
gives the mutable `Request` the scheduler and the block pool work on, and, when it
finishes, a frozen `RequestTimings` (arrival, first scheduled, every output event,
finish) from which TTFT, ITL, queue, prefill and decode times follow.

Output tokens. The twin has no model, so output token `i` of a request is
`output_token_id(seed, i, vocab_size)`: a 32-bit mix (murmur3's finaliser) of
`seed + 0x9E3779B9 · i`, taken modulo the vocabulary. `seed` defaults to
`request_seed(request_id)`, the CRC-32 of the id's UTF-8 bytes, so a request's
tokens are the same in every run and survive preemption. There is no EOS token:
a request generates exactly `max_tokens` (capped so prompt + output fit
`max_model_len`) unless one of its `stop_token_ids` comes up once `min_tokens`
have been generated. `ignore_eos` is accepted and changes nothing.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

__all__ = [
    "FinishReason",
    "Request",
    "RequestStatus",
    "RequestTimings",
    "SamplingParams",
    "output_token_id",
    "output_token_ids",
    "request_seed",
]

_MASK32 = 0xFFFFFFFF
_PLAN_MAX = 1024


class FinishReason(StrEnum):
    LENGTH = "length"
    STOP = "stop"
    ERROR = "error"  # an injected fault (`faults.error_rate`)
    ABORT = "abort"  # the client went away


class RequestStatus(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """The limits of one request's generation (what the OpenAI body's fields map to)."""

    max_tokens: int = 16
    min_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {self.max_tokens}")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be zero or more, not {self.min_tokens}")


def request_seed(request_id: str) -> int:
    """The default output seed of a request: CRC-32 of its id."""
    return zlib.crc32(request_id.encode("utf-8"))


def output_token_ids(seed: int, first: int, count: int, vocab_size: int) -> list[int]:
    """`output_token_id` for indices `first .. first + count - 1`, vectorised (in uint32,
    whose products wrap modulo 2^32 as the rule's masks do)."""
    x = np.arange(first, first + count, dtype=np.uint32)
    x *= np.uint32(0x9E3779B9)
    x += np.uint32(seed & _MASK32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    x %= np.uint32(vocab_size)
    return x.tolist()


def output_token_id(seed: int, index: int, vocab_size: int) -> int:
    """Output token `index` (0-based) of a request seeded `seed`; in `[0, vocab_size)`."""
    x = (seed + 0x9E3779B9 * index) & _MASK32
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & _MASK32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & _MASK32
    x ^= x >> 16
    return x % vocab_size


@dataclass(frozen=True, slots=True)
class RequestTimings:
    """One finished request as the engine saw it; times are on the engine's clock."""

    request_id: str
    arrival_ts: float
    first_scheduled_ts: float | None
    first_token_ts: float | None
    finished_ts: float
    output_event_ts: tuple[float, ...]  # when each step's new tokens were ready
    output_event_tokens: tuple[int, ...]  # how many tokens each of those steps added
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int  # prompt tokens served from the prefix cache at first admission
    num_preemptions: int
    finish_reason: FinishReason

    @property
    def queue_s(self) -> float | None:
        """Waiting before the first schedule (vLLM's queue time)."""
        return (
            None if self.first_scheduled_ts is None else self.first_scheduled_ts - self.arrival_ts
        )

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_ts is None else self.first_token_ts - self.arrival_ts

    @property
    def prefill_s(self) -> float | None:
        if self.first_token_ts is None or self.first_scheduled_ts is None:
            return None
        return self.first_token_ts - self.first_scheduled_ts

    @property
    def decode_s(self) -> float | None:
        if self.first_token_ts is None:
            return None
        return self.output_event_ts[-1] - self.first_token_ts

    @property
    def e2e_s(self) -> float:
        return self.finished_ts - self.arrival_ts

    def itl_s(self) -> list[float]:
        """Gaps between successive output events (one per engine step that emitted tokens)."""
        ts = self.output_event_ts
        return [b - a for a, b in itertools.pairwise(ts)]


class Request:
    """A request's state inside the engine core; only the scheduler mutates it."""

    __slots__ = (
        "_planned",
        "arrival_ts",
        "block_hashes",
        "decodes_plainly",
        "finish_reason",
        "finished_ts",
        "first_scheduled_ts",
        "first_token_ts",
        "max_num_tokens",
        "max_output_tokens",
        "num_cached_tokens",
        "num_computed_tokens",
        "num_preemptions",
        "num_prompt_tokens",
        "output_event_tokens",
        "output_event_ts",
        "output_seed",
        "params",
        "request_id",
        "status",
        "token_ids",
        "vocab_size",
        "will_fail",
    )

    def __init__(  # noqa: PLR0917 — the engine builds every request in one place
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        arrival_ts: float,
        max_output_tokens: int,
        output_seed: int,
        vocab_size: int,
        will_fail: bool = False,
    ) -> None:
        self.request_id = request_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.token_ids)
        self.params = params
        self.arrival_ts = arrival_ts
        self.max_output_tokens = max_output_tokens
        self.output_seed = output_seed
        self.vocab_size = vocab_size
        self.will_fail = will_fail
        # what a decode run's checks read once a step (all fixed for the request's life)
        self.max_num_tokens = self.num_prompt_tokens + max_output_tokens  # prompt + output
        self.decodes_plainly = not will_fail and not params.stop_token_ids
        self._planned: list[int] = []
        self.num_computed_tokens = 0
        self.num_cached_tokens = -1  # set at first admission
        self.num_preemptions = 0
        self.status = RequestStatus.WAITING
        self.block_hashes: list[int] = []
        self.first_scheduled_ts: float | None = None
        self.first_token_ts: float | None = None
        self.finished_ts: float | None = None
        self.finish_reason: FinishReason | None = None
        self.output_event_ts: list[float] = []
        self.output_event_tokens: list[int] = []

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def next_output_tokens(self, count: int) -> list[int]:
        """The next `count` output token ids by the rule, drawn up to `_PLAN_MAX` at a time:
        the whole output at once unless it is longer."""
        first = len(self.token_ids) - self.num_prompt_tokens
        planned = self._planned
        num_planned = len(planned)
        if first + count > num_planned:
            rest = min(self.max_output_tokens - num_planned, _PLAN_MAX)
            extra = max(rest, first + count - num_planned)
            planned.extend(output_token_ids(self.output_seed, num_planned, extra, self.vocab_size))
        return planned[first : first + count]

    def make_timings(self) -> RequestTimings:
        """The frozen record of a finished request."""
        if self.finished_ts is None or self.finish_reason is None:
            raise RuntimeError(f"request {self.request_id} has not finished")
        return RequestTimings(
            request_id=self.request_id,
            arrival_ts=self.arrival_ts,
            first_scheduled_ts=self.first_scheduled_ts,
            first_token_ts=self.first_token_ts,
            finished_ts=self.finished_ts,
            output_event_ts=tuple(self.output_event_ts),
            output_event_tokens=tuple(self.output_event_tokens),
            num_prompt_tokens=self.num_prompt_tokens,
            num_output_tokens=self.num_output_tokens,
            num_cached_tokens=max(0, self.num_cached_tokens),
            num_preemptions=self.num_preemptions,
            finish_reason=self.finish_reason,
        )
