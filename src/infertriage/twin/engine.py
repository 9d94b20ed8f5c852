"""twin, level 2: the engine core: schedule → execute → update, on an injectable clock.

Takes a `Scenario` and a `Clock` (`MonotonicClock` behind the HTTP server,
`VirtualClock` in `simulate`); requests come in through `add_request`. Each
`step()` gives a frozen `StepResult`: the scheduled batch's shape, its
`StepBreakdown` from the cost model, the `RequestOutput`s (new token ids, finish
reasons, and `RequestTimings` for finished requests), and a `SchedulerStats`
snapshot. `get_gpu_counters()` gives cumulative GPU activity from which DCGM-style
gauges follow as deltas over a scrape window.

The engine never sleeps and never moves the clock: a step starts at
`max(clock.now(), previous step's end)` (or at a start the caller gives, which the
real-time driver uses to keep steps back to back) and its outputs carry `start + duration`;
the driver waits (real time) or advances the clock (virtual time) to that moment.
`step_decode_run(until_ts)` is the virtual-time shortcut: the run of plain decode
steps that `step()` would take until something changes (a request finishes, one
arrives, blocks run short), applied at once and given as one `DecodeRun`.

As vLLM's engine core does by default (`--async-scheduling`), step k+1 is scheduled while
step k runs: a request that reaches the engine during a busy step is first scheduled in
the step after next (`engine.async_scheduling: false` takes it in the next one), and an
idle engine takes it at once. A request reaches the engine `frontend.handoff_ms` after it
reached the API server (vLLM's API-server-to-engine-core hand-off; fitted, see
`scenario_model.HANDOFF_MS`).

Execution is simulated: a sampling request gets its next output token by the rule
in `twin.request`; with speculative decoding each of its k draft positions is
accepted with probability `acceptance_rate` until the first rejection (seeded RNG),
and the step yields the accepted drafts plus one token. With
`faults.error_rate` > 0 a seeded fraction of requests fail in their first step.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from infertriage.plan import RooflineParams
from infertriage.twin.blocks import BlockPool, KVCacheManager
from infertriage.twin.capacity import Hardware, make_hardware
from infertriage.twin.costmodel import BatchShape, CostModel, StepBreakdown
from infertriage.twin.offload import make_tier
from infertriage.twin.request import (
    FinishReason,
    Request,
    SamplingParams,
    request_seed,
)
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import (
    RequestOutput,
    Scheduler,
    SchedulerConfig,
    SchedulerOutput,
    SchedulerStats,
)

__all__ = [
    "Clock",
    "DecodeRun",
    "EngineCore",
    "GpuCounters",
    "MonotonicClock",
    "RequestRejectedError",
    "StepResult",
    "VirtualClock",
]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the clock's start."""
        ...


class MonotonicClock:
    """Real time: seconds on `time.monotonic` since construction."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._start


class VirtualClock:
    """Simulated time that moves only when told to."""

    def __init__(self, start_ts: float = 0.0) -> None:
        self._now = start_ts

    def now(self) -> float:
        return self._now

    def advance_to(self, ts: float) -> None:
        """Move forward to `ts` (never backwards)."""
        self._now = max(self._now, ts)


class RequestRejectedError(ValueError):
    """A request the engine cannot take (the HTTP server answers 400)."""


@dataclass(frozen=True, slots=True)
class GpuCounters:
    """Cumulative per-GPU activity since the engine started, in seconds (and bytes, FLOPs)."""

    num_steps: int = 0
    step_s: float = 0.0
    util_busy_s: float = 0.0
    kernel_s: float = 0.0
    launch_gap_s: float = 0.0
    cpu_s: float = 0.0
    comm_s: float = 0.0
    sm_active_s: float = 0.0
    tensor_active_s: float = 0.0
    dram_active_s: float = 0.0
    comm_bytes: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0


_COUNTER_FIELDS = (
    "util_busy_s",
    "kernel_s",
    "launch_gap_s",
    "cpu_s",
    "comm_s",
    "sm_active_s",
    "tensor_active_s",
    "dram_active_s",
    "comm_bytes",
    "flops",
    "bytes",
)


class _CounterSums:
    """The running sums behind `GpuCounters` (one list add per field and step)."""

    __slots__ = ("num_steps", "step_s", "sums")

    def __init__(self) -> None:
        self.num_steps = 0
        self.step_s = 0.0
        self.sums = [0.0] * len(_COUNTER_FIELDS)

    def add(self, cost: StepBreakdown, num_steps: int = 1) -> None:
        self.num_steps += num_steps
        self.step_s += cost.total_s
        sums = self.sums
        for index, name in enumerate(_COUNTER_FIELDS):
            sums[index] += getattr(cost, name)

    def snapshot(self) -> GpuCounters:
        values = dict(zip(_COUNTER_FIELDS, self.sums, strict=True))
        return GpuCounters(num_steps=self.num_steps, step_s=self.step_s, **values)


@dataclass(frozen=True, slots=True)
class StepResult:
    """One engine step; `outputs` are stamped `end_ts`."""

    step_index: int
    start_ts: float
    end_ts: float
    shape: BatchShape
    cost: StepBreakdown
    outputs: tuple[RequestOutput, ...]
    preempted_ids: tuple[str, ...]
    kv_usage: float  # right after scheduling: the step's peak
    stats: SchedulerStats  # after the update
    # `step(group_decodes=True)`: the running requests that each gained one token, their
    # chunks before `outputs`'s, and those of them that finished (not in `outputs`)
    decoded_ids: tuple[str, ...] = ()
    decoded_finished: tuple[RequestOutput, ...] = ()

    @property
    def duration_s(self) -> float:
        return self.end_ts - self.start_ts


@dataclass(frozen=True, slots=True)
class DecodeRun:
    """Several pure-decode steps taken at once: every running request gained one token each."""

    start_ts: float
    step_end_ts: tuple[float, ...]
    cost: StepBreakdown  # the steps summed
    memory_bound_s: float  # of those steps' time, memory-bound
    request_ids: tuple[str, ...]  # the batch, in scheduling order
    finished: tuple[RequestOutput, ...]  # requests that finished in the last step
    kv_usage: float  # after the last step's allocations, before finished requests' blocks return
    kv_usage_s: float  # Σ over the steps of the usage after the step's allocations × its length
    num_free_blocks: int  # after the run, the finished requests' blocks returned

    @property
    def end_ts(self) -> float:
        return self.step_end_ts[-1]


class EngineCore:
    """A simulated vLLM-V1 engine core for one scenario."""

    def __init__(
        self,
        scenario: Scenario,
        clock: Clock | None = None,
        *,
        params: RooflineParams | None = None,
    ) -> None:
        self.scenario = scenario
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.hardware: Hardware = make_hardware(scenario)
        engine = scenario.engine
        pool = BlockPool(self.hardware.num_gpu_blocks, enable_caching=engine.enable_prefix_caching)
        self.kv = KVCacheManager(
            pool, engine.block_size, engine.max_model_len, make_tier(scenario, self.hardware)
        )
        config = SchedulerConfig(
            max_num_seqs=engine.max_num_seqs,
            max_num_batched_tokens=engine.max_num_batched_tokens,
            max_model_len=engine.max_model_len,
            enable_chunked_prefill=engine.enable_chunked_prefill,
            num_spec_tokens=scenario.speculative.num_draft_tokens,
            kv_leak_blocks_per_request=scenario.faults.kv_leak_blocks_per_request,
        )
        self.scheduler = Scheduler(config, self.kv)
        self.cost_model = CostModel(self.hardware, scenario, params)
        self._spec_rng = random.Random(scenario.seed)
        self._fault_rng = random.Random(scenario.seed + 1)
        self._acceptance_rate = scenario.speculative.acceptance_rate
        self._last_end_ts = self.clock.now()
        self._handoff_s = scenario.frontend.handoff_ms * 1e-3
        self._busy: tuple[float, float] | None = None  # (start, end) of the last step with work
        self._step_index = 0
        self._counters = _CounterSums()
        # a data-parallel rank's speed (`data_parallel.rank_speed`): its steps take 1/speed
        self.slowdown = 1.0

    # ------------------------------------------------------------------ facts
    @property
    def max_model_len(self) -> int:
        return self.scenario.engine.max_model_len

    @property
    def vocab_size(self) -> int:
        return self.hardware.spec.vocab_size

    @property
    def num_gpu_blocks(self) -> int:
        return self.hardware.num_gpu_blocks

    # ------------------------------------------------------------------ requests
    def add_request(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        params: SamplingParams | None = None,
        *,
        arrival_ts: float | None = None,
        output_seed: int | None = None,
        num_computed_tokens: int = 0,
    ) -> None:
        """Queue a request; `RequestRejectedError` when the prompt is empty or too long.

        `num_computed_tokens`: prompt tokens whose KV is already in hand (a decode instance's
        request, prefilled elsewhere); admission takes blocks for them and computes the rest.
        """
        params = params if params is not None else SamplingParams()
        num_prompt = len(prompt_token_ids)
        if num_prompt == 0:
            raise RequestRejectedError("the prompt has no tokens")
        if num_prompt >= self.max_model_len:
            raise RequestRejectedError(
                f"the prompt has {num_prompt} tokens; this model's maximum context length "
                f"is {self.max_model_len}"
            )
        error_rate = self.scenario.faults.error_rate
        request = Request(
            request_id,
            prompt_token_ids,
            params,
            # The engine core sees the request once the API server has handed it over.
            (self.clock.now() if arrival_ts is None else arrival_ts) + self._handoff_s,
            min(params.max_tokens, self.max_model_len - num_prompt),
            request_seed(request_id) if output_seed is None else output_seed,
            self.vocab_size,
            will_fail=error_rate > 0 and self._fault_rng.random() < error_rate,
        )
        request.num_computed_tokens = min(num_computed_tokens, num_prompt - 1)
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids: Iterable[str]) -> list[RequestOutput]:
        """Drop requests (the client went away); their blocks return at once."""
        return self.scheduler.finish_requests(request_ids, FinishReason.ABORT, self.clock.now())

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # ------------------------------------------------------------------ the step
    @property
    def last_end_ts(self) -> float:
        """When the latest step ended (the clock's start before the first)."""
        return self._last_end_ts

    def step(self, start_ts: float | None = None, *, group_decodes: bool = False) -> StepResult:
        """Schedule, execute (cost model) and update once; an idle step lasts zero seconds.

        The step starts at `start_ts` (default: now), never before the previous step ended.
        `group_decodes` (virtual time): running requests that each decode one plain token are
        given as `decoded_ids`, without a `RequestOutput` each (`Scheduler.schedule`).
        """
        start_ts = max(self.clock.now() if start_ts is None else start_ts, self._last_end_ts)
        scheduler = self.scheduler
        if scheduler.waiting and not scheduler.running:
            # An idle engine starts its next step when the first request reaches it.
            start_ts = max(start_ts, scheduler.waiting[0].arrival_ts)
        output = scheduler.schedule(
            start_ts, self._admit_until(start_ts), group_decodes=group_decodes
        )
        shape = _make_shape(output)
        cost = self.cost_model.step_cost(shape)
        # loads from the CPU tier; a throttled data-parallel rank's steps take 1/speed
        end_ts = start_ts + cost.total_s * self.slowdown + output.offload_load_s
        group = output.decode_group
        decoded = scheduler.update_decode_group(output, end_ts) if group else []
        outputs = scheduler.update_from_output(output, self._sample(output), end_ts)
        self._last_end_ts = end_ts
        # An empty step drains the async pipeline: the next one sees every arrival so far.
        self._busy = (start_ts, end_ts) if shape.num_tokens else None
        self._step_index += 1
        if shape.num_tokens:
            self._counters.add(cost)
        return StepResult(
            step_index=self._step_index,
            start_ts=start_ts,
            end_ts=end_ts,
            shape=shape,
            cost=cost,
            outputs=tuple(outputs),
            preempted_ids=output.preempted_ids,
            kv_usage=output.kv_usage,
            stats=self.scheduler.make_stats(self._num_waiting()),
            decoded_ids=tuple([r.request_id for r in group]),
            decoded_finished=tuple(decoded),
        )

    def _admit_until(self, start_ts: float) -> float:
        """When this step's batch was fixed: with async scheduling and the engine busy, at the
        previous step's start (it was scheduled while that step ran); else now."""
        busy = self._busy
        if self.scenario.engine.async_scheduling and busy and start_ts <= busy[1]:
            return busy[0]
        return start_ts

    def step_decode_run(
        self, until_ts: float, max_steps: int | None = None, *, batch_kept_until: float = -1.0
    ) -> DecodeRun | None:
        """Take back-to-back pure-decode steps, exactly as `step()` would, up to and including
        the first that ends at or after `until_ts`.

        A shortcut for virtual time: None when the next step is not a plain decode of the
        whole batch (admission possible, a prefill, speculation, blocks running short); then
        call `step()`. With async scheduling, nothing waiting, and the caller promising that
        until `batch_kept_until` (after that step's end) only new requests, arriving at or
        after `until_ts`, reach the engine, the step after it is taken too: its batch was
        fixed when that step started, before any of them arrived.
        """
        scheduler = self.scheduler
        start_ts = max(self.clock.now(), self._last_end_ts)
        limit, context = scheduler.max_decode_run(self._admit_until(start_ts))
        if max_steps is not None:
            limit = min(limit, max_steps)
        running = scheduler.running
        limit = self._steps_that_fit(running, limit)
        if limit <= 0:
            return None
        batch = len(running)
        run = self.cost_model.decode_run(batch, context, limit, start_ts, until_ts)
        ends = run.step_end_ts
        if len(ends) < limit and ends[-1] < batch_kept_until:
            fixed_ts = ends[-2] if len(ends) > 1 else start_ts  # the last step's start
            if (
                self.scenario.engine.async_scheduling
                and fixed_ts < until_ts
                and not scheduler.waiting
            ):
                run = self.cost_model.decode_run(batch, context, len(ends) + 1, start_ts, math.inf)
                ends = run.step_end_ts
        request_ids = tuple([r.request_id for r in running])
        num_free = self.kv.pool.get_num_free_blocks()
        taken_at: list[int] | None = [] if len(ends) > 1 else None
        finished, kv_usage = scheduler.apply_decode_run(ends, taken_at)
        if taken_at is None:
            kv_usage_s = kv_usage * run.total.total_s
        else:
            kv_usage_s = self._kv_usage_s(start_ts, ends, num_free, taken_at)
        self._counters.add(run.total, len(ends))
        self._last_end_ts = ends[-1]
        self._busy = (ends[-2] if len(ends) > 1 else start_ts, ends[-1])
        self._step_index += len(ends)
        return DecodeRun(
            start_ts=start_ts,
            step_end_ts=ends,
            cost=run.total,
            memory_bound_s=run.memory_bound_s,
            request_ids=request_ids,
            finished=tuple(finished),
            kv_usage=kv_usage,
            kv_usage_s=kv_usage_s,
            num_free_blocks=self.kv.pool.get_num_free_blocks(),
        )

    def _kv_usage_s(
        self, start_ts: float, step_end_ts: Sequence[float], num_free: int, taken_at: list[int]
    ) -> float:
        """Σ over a run's steps of the KV usage after each step's allocations × its length,
        from the free blocks before the run and the step that took each block."""
        num_steps = len(step_end_ts)
        taken = np.cumsum(np.bincount(taken_at, minlength=num_steps + 1)[1:])
        usage = 1.0 - (num_free - taken) / (self.kv.pool.num_gpu_blocks - 1)
        ends = np.asarray(step_end_ts)
        lengths = ends - np.concatenate(((start_ts,), ends[:-1]))
        return float(usage @ lengths)

    def _steps_that_fit(self, running: Sequence[Request], limit: int) -> int:
        """The most decode steps, up to `limit`, whose blocks are free (no preemption)."""
        if limit <= 0 or self.kv.fits(running, limit):
            return limit
        free = self.kv.pool.get_num_free_blocks()
        need = self.kv.num_new_blocks_for
        low, high = 0, limit - 1
        while low < high:
            middle = (low + high + 1) // 2
            if need(running, middle) <= free:
                low = middle
            else:
                high = middle - 1
        return low

    def _sample(self, output: SchedulerOutput) -> Mapping[str, Sequence[int]]:
        """The simulated model runner: accepted draft tokens plus one, for each sampler."""
        sampled: dict[str, list[int]] = {}
        rng = self._spec_rng.random
        rate = self._acceptance_rate
        for item in output.scheduled:
            if not item.samples:
                continue
            accepted = 0
            while accepted < item.num_draft_tokens and rng() < rate:
                accepted += 1
            sampled[item.request.request_id] = item.request.next_output_tokens(accepted + 1)
        return sampled

    # ------------------------------------------------------------------ stats
    def get_stats(self) -> SchedulerStats:
        return self.scheduler.make_stats(self._num_waiting())

    def _num_waiting(self) -> int:
        """The waiting queue as vLLM's engine core would report it after the last step: under
        async scheduling the step after it was decided when that step started."""
        busy, end_ts = self._busy, self._last_end_ts
        async_busy = busy is not None and self.scenario.engine.async_scheduling
        decided_ts = busy[0] if busy is not None and async_busy else None
        return self.scheduler.num_waiting_at(end_ts, decided_ts)

    def get_gpu_counters(self) -> GpuCounters:
        return self._counters.snapshot()


def _make_shape(output: SchedulerOutput) -> BatchShape:
    chunks: list[tuple[int, int]] = []
    num_decode = decode_tokens = len(output.decode_group)
    context_sum = output.decode_context
    max_drafts = 0
    for item in output.scheduled:
        if item.is_decode:
            num_decode += 1
            context_sum += item.num_computed_before
            decode_tokens += item.num_new_tokens
            max_drafts = max(max_drafts, item.num_draft_tokens)
        else:
            chunks.append((item.num_new_tokens, item.num_computed_before))
    return BatchShape(tuple(chunks), num_decode, context_sum, decode_tokens, max_drafts)
