"""twin, level 2: the API server's CPU work on the virtual clock, for `simulate`.

Takes the scenario's `FrontendSettings`; gives `FrontendCosts` (seconds of CPU to
tokenize a prompt, and to detokenize and serialize one streamed chunk, the same
costs the real-time front end spends as real CPU) and `VirtualFrontend`: one
worker that serves its items first come, first served, so a saturated front end
delays tokenization (the engine starves) and every stream's chunks, as a busy
Python API server does.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.twin.scenario_model import FrontendSettings

__all__ = ["FrontendCosts", "VirtualFrontend"]


@dataclass(frozen=True, slots=True)
class FrontendCosts:
    tokenize_s_per_token: float
    detokenize_s_per_token: float
    serialize_s_per_chunk: float

    @classmethod
    def from_settings(cls, settings: FrontendSettings) -> FrontendCosts:
        return cls(
            tokenize_s_per_token=settings.tokenize_us_per_token * 1e-6,
            detokenize_s_per_token=settings.detokenize_us_per_token * 1e-6,
            serialize_s_per_chunk=settings.serialize_us_per_chunk * 1e-6,
        )

    def tokenize_s(self, num_prompt_tokens: int) -> float:
        return num_prompt_tokens * self.tokenize_s_per_token

    def chunk_s(self, num_tokens: int) -> float:
        """One streamed chunk carrying `num_tokens` new tokens."""
        return num_tokens * self.detokenize_s_per_token + self.serialize_s_per_chunk


class VirtualFrontend:
    """One FIFO worker on the virtual clock; items must be offered in order of `ready_ts`."""

    def __init__(self, costs: FrontendCosts) -> None:
        self.costs = costs
        self.free_ts = 0.0
        self.busy_s = 0.0

    def _run(self, ready_ts: float, work_s: float) -> float:
        self.free_ts = max(self.free_ts, ready_ts) + work_s
        self.busy_s += work_s
        return self.free_ts

    def tokenize(self, ready_ts: float, num_prompt_tokens: int) -> float:
        """When the prompt reaches the engine."""
        return self._run(ready_ts, self.costs.tokenize_s(num_prompt_tokens))

    def deliver(self, ready_ts: float, num_tokens: int) -> float:
        """When a chunk the engine produced at `ready_ts` reaches the client."""
        return self._run(ready_ts, self.costs.chunk_s(num_tokens))

    def deliver_batch(self, ready_ts: float, num_chunks: int) -> float:
        """`num_chunks` one-token chunks ready together; the k-th (0-based) is delivered at
        the returned start plus `(k + 1) · chunk_s(1)`."""
        start_ts = max(self.free_ts, ready_ts)
        work_s = num_chunks * self.costs.chunk_s(1)
        self.free_ts = start_ts + work_s
        self.busy_s += work_s
        return start_ts
