"""workload, level 1: what one request asks for, before any I/O.

Takes nothing; gives `RequestSpec` (the messages of one request, its length
targets and labels), `Turn` and `SynthText` (a placeholder for N tokens of
deterministic text, rendered at send time so that a schedule of 100,000
requests stays small), `SessionStep` (requests a session sends together once
its previous step is answered and a delay has passed: a turn, a tool result,
fan-out children) and `Schedule` (specs with their intended start offsets and,
for session workloads, the sessions that order them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["RequestSpec", "Schedule", "Session", "SessionStep", "SynthText", "Turn"]


@dataclass(frozen=True, slots=True)
class SynthText:
    """`num_tokens` tokens of deterministic text; the same `key` always renders the same text.

    Two requests that share a `SynthText` share a prefix a server's prefix cache can hit.
    """

    num_tokens: int
    key: int


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a chat: its role and its text (literal, or synthetic)."""

    role: str
    content: str | SynthText


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request: its messages, prompt-length target, output budget and labels.

    `prompt_tokens` is the intended prompt length (synthetic) or an estimate
    (datasets); the server's `usage` is what gets recorded. `ignore_eos` asks
    servers that support it (vLLM, SGLang) to generate exactly `max_tokens`.
    """

    index: int
    turns: tuple[Turn, ...]
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool = True
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SessionStep:
    """Requests a session sends together, `delay_s` after every request of its previous step
    was answered (think time, a tool's latency; 0 for fan-out children, sent at once).

    `indices` are positions in the schedule's `specs`; more than one: fan-out children.
    """

    indices: tuple[int, ...]
    delay_s: float = 0.0


Session = tuple[SessionStep, ...]


@dataclass(frozen=True, slots=True)
class Schedule:
    """Requests in send order with their intended start, in seconds after the load begins.

    `offsets_s` is None for a closed loop (each request starts when a slot
    frees); an open loop's offsets are absolute deadlines, so a late send never
    pushes the next one back.

    `sessions` (agentic workloads): each session's steps, in order; a step is sent
    once the previous one is answered. A session starts at its first request's
    offset (open loop) or when a closed loop's user takes it; its other offsets
    are unused.
    """

    specs: tuple[RequestSpec, ...]
    offsets_s: npt.NDArray[np.float64] | None = field(default=None, compare=False)
    sessions: tuple[Session, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.offsets_s is not None and len(self.offsets_s) != len(self.specs):
            raise ValueError("one offset per request")
        if self.sessions is not None:
            seen = sorted(i for s in self.sessions for step in s for i in step.indices)
            if seen != list(range(len(self.specs))):
                raise ValueError("sessions must name every request once")

    def __len__(self) -> int:
        return len(self.specs)

    def take(self, indices: Sequence[int] | slice) -> Schedule:
        """A sub-schedule (a worker's share): same specs and deadlines, fewer of them."""
        picked = range(len(self.specs))[indices] if isinstance(indices, slice) else indices
        specs = tuple(self.specs[i] for i in picked)
        if self.offsets_s is None:
            return Schedule(specs)
        return Schedule(specs, self.offsets_s[np.asarray(list(picked), dtype=np.int64)])

    def share(self, worker: int, num_workers: int) -> Schedule:
        """One worker's share: every Nth request, or every Nth whole session (its steps kept)."""
        if self.sessions is None:
            return self.take(slice(worker, None, num_workers))
        mine = self.sessions[worker::num_workers]
        picked = sorted(i for s in mine for step in s for i in step.indices)
        where = {old: new for new, old in enumerate(picked)}
        sessions = tuple(
            tuple(SessionStep(tuple(where[i] for i in st.indices), st.delay_s) for st in s)
            for s in mine
        )
        sub = self.take(picked)
        return Schedule(sub.specs, sub.offsets_s, sessions)
