"""twin, level 2: the API server's CPU work on the virtual clock, for `simulate`.

Takes the scenario's `FrontendSettings`; gives `FrontendCosts` (seconds of CPU to
tokenize a prompt, and to detokenize and serialize one streamed chunk, the same
costs the real-time front end spends as real CPU) and `VirtualFrontend`: one
worker that serves its items first come, first served, so a saturated front end
delays tokenization (the engine starves) and every stream's chunks, as a busy
Python API server does.

Around that work the real-time twin pays a hand-off that is latency, not front-end
work, and `simulate` adds it as two measured constants (`REQUEST_LATENCY_S`,
`RESPONSE_LATENCY_S`) so that its TTFT is what a client of the twin sees:

- a request reaches the front end `REQUEST_LATENCY_S` after the client sent it: the
  client's send, loopback TCP, aiohttp parsing the request and reading and decoding
  its JSON body before tokenization starts;
- a chunk reaches the client `RESPONSE_LATENCY_S` after the step that produced it
  ended, beyond its detokenize and serialize work: the engine thread waking at the
  step's end and handing the outputs to the event loop, the stream's task waking,
  the response headers (first chunk) and loopback TCP to the client.

Measured on the 2-core development machine (Python 3.11, aiohttp 3.14, loopback, a
raw aiohttp client; 60 requests at 4 req/s, 512 prompt and 64 output tokens, with
the timestamps of each request at the client's send, the handler's start, the
engine's admission, the step's end, the hand-off and the first write, on the
system-wide monotonic clock): send to admission minus the modelled tokenization
0.92 and 0.99 ms at the median over two runs; step end to the first chunk at the
client minus the modelled detokenize and serialize 0.86 and 0.80 ms. Later chunks
carry no headers and arrive sooner after their step (about 0.5 ms); the constant is
the same for every chunk of a stream, so it moves TTFT and end-to-end latency and
no inter-token gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.twin.scenario_model import FrontendSettings

__all__ = ["REQUEST_LATENCY_S", "RESPONSE_LATENCY_S", "FrontendCosts", "VirtualFrontend"]

REQUEST_LATENCY_S = 0.9e-3
RESPONSE_LATENCY_S = 0.8e-3


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

    def tokenize(self, sent_ts: float, num_prompt_tokens: int) -> float:
        """When the prompt of a request the client sent at `sent_ts` reaches the engine."""
        return self._run(sent_ts + REQUEST_LATENCY_S, self.costs.tokenize_s(num_prompt_tokens))

    def deliver(self, ready_ts: float, num_tokens: int) -> float:
        """When a chunk the engine produced at `ready_ts` reaches the client."""
        return self._run(ready_ts, self.costs.chunk_s(num_tokens)) + RESPONSE_LATENCY_S

    def deliver_batch(self, ready_ts: float, num_chunks: int) -> float:
        """`num_chunks` one-token chunks ready together; the k-th (0-based) reaches the
        client at the returned time plus `(k + 1) · chunk_s(1)`."""
        start_ts = max(self.free_ts, ready_ts)
        work_s = num_chunks * self.costs.chunk_s(1)
        self.free_ts = start_ts + work_s
        self.busy_s += work_s
        return start_ts + RESPONSE_LATENCY_S
