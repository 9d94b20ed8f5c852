"""twin, level 2: the engine core's scheduler, after vLLM V1's `Scheduler`.

Takes requests (`add_request`), a `KVCacheManager` and the engine's limits; each
step `schedule(now_ts)` gives a `SchedulerOutput` (which requests run how many
tokens, which were preempted) and `update_from_output` applies the model's sampled
tokens, finishes requests and gives their `RequestOutput`s. `make_stats` gives a
plain `SchedulerStats`; the core never imports Prometheus.

Policy, as vLLM V1 with its default FCFS policy:
- running requests first, in admission order, each up to its remaining tokens
  (1 + draft tokens in decode) under the step's token budget (`max_num_batched_tokens`);
- when blocks run out, the most recently admitted running request is preempted by
  recompute: its blocks are freed, its computed tokens reset, and it goes to the front
  of the waiting queue; if that is the request being scheduled, the loop stops;
- then, only in a step without preemptions, waiting requests in FCFS order while
  running < `max_num_seqs` and budget remains: each takes its prefix-cache hit and a
  prompt chunk that fits the budget (without chunked prefill, a prompt that does not
  fit whole ends admission); the first that cannot get blocks ends admission;
- with a CPU offload tier, a waiting request's prefix blocks after its GPU hit that the tier
  holds are loaded, not recomputed (vLLM's external computed tokens): the step pays their
  load time (`SchedulerOutput.offload_load_s`), and prompts are counted by source.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from infertriage.twin.blocks import KVBlock, KVCacheManager
from infertriage.twin.offload import OffloadStats, PromptSources
from infertriage.twin.request import FinishReason, Request, RequestStatus, RequestTimings

__all__ = [
    "RequestOutput",
    "ScheduledRequest",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "SchedulerStats",
    "SpecDecodeCounters",
]


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_chunked_prefill: bool = True
    num_spec_tokens: int = 0
    kv_leak_blocks_per_request: int = 0


@dataclass(frozen=True, slots=True)
class ScheduledRequest:
    """One request's share of a step."""

    request: Request
    num_new_tokens: int  # tokens computed this step, draft tokens included
    num_computed_before: int  # tokens already in the KV cache (the attention context)
    num_draft_tokens: int  # draft tokens to verify (decode steps with speculation only)
    samples: bool  # reaches the end of its known tokens, so it samples this step
    is_decode: bool  # computes only its last sampled token (and drafts)


@dataclass(frozen=True, slots=True)
class SchedulerOutput:
    scheduled: tuple[ScheduledRequest, ...]
    num_scheduled_tokens: int
    preempted_ids: tuple[str, ...]
    kv_usage: float  # right after this step's allocations: the step's peak
    offload_load_s: float = 0.0  # loading admitted requests' blocks from the offload tier
    # `schedule(group_decodes=True)`: the running requests, each decoding one plain token
    # (before `scheduled`, which then holds only admissions), and their tokens in the cache
    decode_group: tuple[Request, ...] = ()
    decode_context: int = 0


@dataclass(frozen=True, slots=True)
class RequestOutput:
    """What one request gained in a step (vLLM's `EngineCoreOutput`)."""

    request_id: str
    new_token_ids: tuple[int, ...]
    finish_reason: FinishReason | None
    ts: float
    timings: RequestTimings | None = None  # set when the request finished

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(frozen=True, slots=True)
class SpecDecodeCounters:
    """Cumulative speculative-decoding counters (vLLM's `spec_decode_*`)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: tuple[int, ...] = ()

    @property
    def acceptance_rate(self) -> float | None:
        if not self.num_draft_tokens:
            return None
        return self.num_accepted_tokens / self.num_draft_tokens


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """A snapshot of the scheduler: gauges now, counters cumulative since start."""

    num_running_reqs: int
    num_waiting_reqs: int
    kv_cache_usage: float
    num_free_blocks: int
    num_gpu_blocks: int
    prefix_cache_queries: int  # tokens looked up, once per admission (re-admissions too)
    prefix_cache_hits: int  # tokens
    num_preemptions: int
    num_leaked_blocks: int
    num_prompt_tokens: int  # prompt tokens of requests that got their first token (as vLLM)
    num_prefill_tokens: int  # tokens computed in prefill chunks (hits excluded, recompute in)
    num_generation_tokens: int
    num_finished_reqs: int
    spec_decode: SpecDecodeCounters
    prompt_sources: PromptSources = field(default_factory=PromptSources)  # vLLM's, by source
    offload: OffloadStats | None = None  # the CPU offload tier's counters, when there is one


class Scheduler:
    """Waiting and running queues, the token budget, preemption by recompute."""

    def __init__(self, config: SchedulerConfig, kv: KVCacheManager) -> None:
        self.config = config
        self.kv = kv
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._requests: dict[str, Request] = {}
        self.num_preemptions = 0
        self.num_prompt_tokens = 0
        self.num_prefill_tokens = 0
        self.num_generation_tokens = 0
        self.num_finished_reqs = 0
        self._num_drafts = 0
        self._num_draft_tokens = 0
        self._accepted_per_pos = [0] * config.num_spec_tokens
        self._prompt_sources = PromptSources()
        self._external_tokens: dict[str, int] = {}  # loaded from the tier at first admission
        self._load_s = 0.0  # this step's offload loads
        # Free blocks when the last admission failed for want of blocks: until more are free,
        # every later attempt fails too (decode steps only take blocks).
        self._blocked_at_free: int | None = None
        # `_plain_batch` as `max_decode_run` found it when it gave no run: nothing changes the
        # running requests before the `schedule` that follows, which takes it instead of a
        # second walk; any other change forgets it (boxed: None is a finding too)
        self._plain_memo: tuple[tuple[int, int] | None] | None = None

    # ------------------------------------------------------------------ requests
    def add_request(self, request: Request) -> None:
        self._plain_memo = None
        if request.request_id in self._requests:
            raise ValueError(f"request id {request.request_id!r} is already in the engine")
        self._requests[request.request_id] = request
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def get_request(self, request_id: str) -> Request | None:
        return self._requests.get(request_id)

    def finish_requests(
        self, request_ids: Iterable[str], reason: FinishReason, now_ts: float
    ) -> list[RequestOutput]:
        """End requests from outside (abort); unknown or finished ids are ignored."""
        self._plain_memo = None
        outputs = []
        for request_id in request_ids:
            request = self._requests.get(request_id)
            if request is None:
                continue
            if request in self.running:
                self.running.remove(request)
            else:
                self.waiting.remove(request)
            outputs.append(self._finish(request, reason, now_ts))
        return outputs

    # ------------------------------------------------------------------ schedule
    def schedule(
        self, now_ts: float, admit_until_ts: float | None = None, *, group_decodes: bool = False
    ) -> SchedulerOutput:
        """The next step's batch; a waiting request that arrived after `admit_until_ts` (the
        moment an async scheduler fixed this step, default `now_ts`) waits for the next.

        `group_decodes`: when every running request decodes one plain token and their blocks
        fit, they are the output's `decode_group` (blocks taken in the same order, without a
        `ScheduledRequest` each; `update_decode_group` applies them), the same step."""
        budget = self.config.max_num_batched_tokens
        self._blocked_at_free = None
        self._load_s = 0.0
        scheduled: list[ScheduledRequest] = []
        preempted: list[str] = []
        memo, self._plain_memo = self._plain_memo, None
        group, context = self._decode_group(memo) if group_decodes else ((), 0)
        if group:
            self.kv.grow_all(group, 1)
            budget -= len(group)
        else:
            budget = self._schedule_running(budget, scheduled, preempted)
        if not preempted:
            admit = now_ts if admit_until_ts is None else admit_until_ts
            self._schedule_waiting(budget, scheduled, admit)
        return SchedulerOutput(
            scheduled=tuple(scheduled),
            num_scheduled_tokens=sum(s.num_new_tokens for s in scheduled) + len(group),
            preempted_ids=tuple(preempted),
            kv_usage=self.kv.pool.get_usage(),
            offload_load_s=self._load_s,
            decode_group=group,
            decode_context=context,
        )

    def _decode_group(
        self, memo: tuple[tuple[int, int] | None] | None
    ) -> tuple[tuple[Request, ...], int]:
        """The running requests and their tokens in the cache, if `_schedule_running` would
        give each one plain decode token without preempting (`_plain_batch`, and their blocks
        fit); else none."""
        running = self.running
        plain = self._plain_batch() if memo is None else memo[0]
        if plain is None:
            return (), 0
        if not self.kv.fits(running, 1):
            return (), 0
        return tuple(running), plain[1]

    def _plain_batch(self) -> tuple[int, int] | None:
        """When every running request decodes one plain token next, within the token budget
        (none speculates, fails, has stop tokens or is yet to sample its first token): the
        fewest output tokens any of them has left (at most `max_model_len`), and their tokens
        in the KV cache; else None. One walk over the batch."""
        running, config = self.running, self.config
        if not running or config.num_spec_tokens or len(running) > config.max_num_batched_tokens:
            return None
        fewest_left = config.max_model_len
        context = 0
        for request in running:
            num_tokens = len(request.token_ids)
            computed = request.num_computed_tokens
            if (
                computed != num_tokens - 1
                or request.first_token_ts is None
                or not request.decodes_plainly  # it fails, or it has stop tokens
            ):
                return None
            left = request.max_num_tokens - num_tokens
            fewest_left = min(fewest_left, left)
            context += computed
        return fewest_left, context

    def _num_drafts_for(self, request: Request) -> int:
        # Drafts only in decode, and never past the request's last output token.
        if request.num_computed_tokens != request.num_tokens - 1:
            return 0
        remaining = request.max_output_tokens - request.num_output_tokens
        return max(0, min(self.config.num_spec_tokens, remaining - 1))

    def _schedule_running(
        self, budget: int, scheduled: list[ScheduledRequest], preempted: list[str]
    ) -> int:
        index = 0
        speculate = self.config.num_spec_tokens > 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            num_drafts = self._num_drafts_for(request) if speculate else 0
            remaining = len(request.token_ids) - request.num_computed_tokens
            num_new = min(remaining + num_drafts, budget)
            num_drafts = max(0, num_new - remaining)
            while not self.kv.allocate_slots(request, num_new):
                victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim.request_id)
                if victim is request:
                    return budget
            scheduled.append(self._scheduled(request, num_new, num_drafts))
            budget -= num_new
            index += 1
        return budget

    def _schedule_waiting(
        self, budget: int, scheduled: list[ScheduledRequest], admit_ts: float
    ) -> None:
        """Admit waiting requests that had arrived by `admit_ts`, the moment this step's
        batch was decided (their `first_scheduled_ts`, as vLLM stamps it)."""
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting[0]
            if request.arrival_ts > admit_ts:
                break
            # a prompt whose KV came from a prefill instance (P/D) is not looked up
            remote = request.status is RequestStatus.WAITING and request.num_computed_tokens > 0
            hits: list[KVBlock] = []
            loaded: list[int] = []
            num_hit_tokens = request.num_computed_tokens
            if not remote:
                hits, num_hit_tokens = self.kv.get_computed_blocks(request)
                loaded = self.kv.offload_match(request, len(hits))
            num_external = len(loaded) * self.kv.block_size
            num_new = request.num_tokens - num_hit_tokens - num_external
            if not self.config.enable_chunked_prefill and num_new > budget:
                break
            num_new = min(num_new, budget)
            # the loaded tokens take GPU blocks as computed ones do
            if not self.kv.allocate_slots(request, num_external + num_new, hits):
                self._blocked_at_free = self.kv.pool.get_num_free_blocks()
                break
            self.waiting.popleft()
            if not remote:
                self.kv.record_lookup(request.num_tokens, num_hit_tokens)
            if self.kv.offload is not None and not remote:
                queried = request.num_tokens - num_hit_tokens
                self._load_s += self.kv.offload.load(loaded, queried)
            request.num_computed_tokens = num_hit_tokens + num_external
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_hit_tokens + num_external
                # P/D: the prompt's KV (all but its last token) came over the connector
                external = num_hit_tokens if remote else num_external
                self._external_tokens[request.request_id] = external
            if request.first_scheduled_ts is None:
                request.first_scheduled_ts = admit_ts  # when the batch was decided
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled.append(self._scheduled(request, num_new, 0))
            budget -= num_new

    @staticmethod
    def _scheduled(request: Request, num_new: int, num_drafts: int) -> ScheduledRequest:
        computed = request.num_computed_tokens
        num_tokens = len(request.token_ids)
        samples = computed + num_new - num_drafts >= num_tokens
        is_decode = samples and computed == num_tokens - 1
        return ScheduledRequest(request, num_new, computed, num_drafts, samples, is_decode)

    def _preempt(self, request: Request) -> None:
        if not self.config.num_spec_tokens:  # runs and groups never speculate: nothing left
            self.kv.cache_computed_blocks(request)  # what decode runs left uncached
        self.kv.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(request)

    # ------------------------------------------------------------------ update
    def update_from_output(
        self,
        output: SchedulerOutput,
        sampled: Mapping[str, Sequence[int]],
        now_ts: float,
    ) -> list[RequestOutput]:
        """Apply a step: `sampled[id]` is the accepted tokens of each sampling request."""
        outputs: list[RequestOutput] = []
        finished: list[Request] = []
        for item in output.scheduled:
            request = item.request
            if request.will_fail:
                finished.append(request)
                outputs.append(self._finish(request, FinishReason.ERROR, now_ts))
                continue
            if not item.is_decode:
                self.num_prefill_tokens += item.num_new_tokens
            if not item.samples:
                request.num_computed_tokens += item.num_new_tokens
                continue
            tokens = sampled[request.request_id]
            if item.num_draft_tokens:
                self._count_spec(item.num_draft_tokens, len(tokens) - 1)
            if request.first_token_ts is None:
                self.num_prompt_tokens += request.num_prompt_tokens
                self._prompt_sources = self._prompt_sources.add(
                    request.num_prompt_tokens,
                    max(0, request.num_cached_tokens),
                    self._external_tokens.pop(request.request_id, 0),
                )
            request.num_computed_tokens = request.num_tokens + len(tokens) - 1
            new_tokens, reason = self._append(request, tokens, now_ts)
            self.num_generation_tokens += len(new_tokens)
            if reason is not None:
                finished.append(request)
                outputs.append(self._finish(request, reason, now_ts, new_tokens))
            else:
                outputs.append(RequestOutput(request.request_id, new_tokens, None, now_ts))
        if finished:
            gone = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in gone]
        return outputs

    def update_decode_group(self, output: SchedulerOutput, now_ts: float) -> list[RequestOutput]:
        """Apply a step's `decode_group` (before `update_from_output`, as they come first in
        the batch): one token each; the outputs of those that finished, in batch order."""
        done: list[RequestOutput] = []
        for request in output.decode_group:
            tokens = request.token_ids
            request.num_computed_tokens = len(tokens)
            tokens.extend(request.next_output_tokens(1))
            request.output_event_ts.append(now_ts)
            request.output_event_tokens.append(1)
            if len(tokens) >= request.max_num_tokens:
                done.append(self._finish(request, FinishReason.LENGTH, now_ts, (tokens[-1],)))
        self.num_generation_tokens += len(output.decode_group)
        if done:
            self.running = [r for r in self.running if not r.is_finished]
        return done

    def _count_spec(self, num_drafts: int, num_accepted: int) -> None:
        if num_drafts <= 0:
            return
        self._num_drafts += 1
        self._num_draft_tokens += num_drafts
        for pos in range(num_accepted):
            self._accepted_per_pos[pos] += 1

    def _append(
        self, request: Request, tokens: Sequence[int], now_ts: float
    ) -> tuple[tuple[int, ...], FinishReason | None]:
        """Append sampled tokens, stopping at the first that ends the request (vLLM's check)."""
        params = request.params
        reason: FinishReason | None = None
        count = 0
        if len(tokens) == 1 and not params.stop_token_ids:  # the common case, kept cheap
            request.token_ids.extend(tokens)
            count = 1
            if request.num_output_tokens >= request.max_output_tokens:
                reason = FinishReason.LENGTH
            tokens = ()
        for token in tokens:
            request.token_ids.append(token)
            count += 1
            num_out = request.num_output_tokens
            if num_out >= request.max_output_tokens:
                reason = FinishReason.LENGTH
            elif token in params.stop_token_ids and num_out >= params.min_tokens:
                reason = FinishReason.STOP
            if reason is not None:
                break
        if request.first_token_ts is None:
            request.first_token_ts = now_ts
        request.output_event_ts.append(now_ts)
        request.output_event_tokens.append(count)
        return tuple(request.token_ids[-count:]), reason

    def _finish(
        self,
        request: Request,
        reason: FinishReason,
        now_ts: float,
        new_tokens: tuple[int, ...] = (),
    ) -> RequestOutput:
        leak = self.config.kv_leak_blocks_per_request if reason is not FinishReason.ABORT else 0
        self._external_tokens.pop(request.request_id, None)
        self.kv.free(request, num_leaked=leak)
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
        request.finished_ts = now_ts
        del self._requests[request.request_id]
        self.num_finished_reqs += 1
        return RequestOutput(request.request_id, new_tokens, reason, now_ts, request.make_timings())

    # ------------------------------------------------------------------ decode runs
    def max_decode_run(self, admit_until_ts: float | None = None) -> tuple[int, int]:
        """Steps that would be pure decode back to back with nothing else changing (0 if none),
        and the running requests' tokens in the KV cache.

        Only without speculation, stop tokens or pending faults, and with no waiting request
        that could be admitted (none waiting, `max_num_seqs` reached, or the last admission
        failed for want of blocks and none have been freed since). The run ends when the first
        running request would finish; the blocks are the caller's to check. One step when the
        next step's batch was fixed at `admit_until_ts` (async scheduling) before the first
        waiting request arrived: that step admits nothing, as `schedule` would find (which
        also forgets a failed admission, as this does then).
        """
        self._plain_memo = None  # only this call's finding is kept
        plain = self._plain_batch()
        if plain is None:
            self._plain_memo = (None,)
            return 0, 0
        steps, context = plain
        if self.waiting and len(self.running) < self.config.max_num_seqs:
            blocked = self._blocked_at_free
            if blocked is None or self.kv.pool.get_num_free_blocks() > blocked:
                if admit_until_ts is None or self.waiting[0].arrival_ts <= admit_until_ts:
                    self._plain_memo = (plain,)
                    return 0, 0
                self._blocked_at_free = None
                steps = min(1, steps)
        return steps, context

    def apply_decode_run(
        self, step_end_ts: Sequence[float], taken_at: list[int] | None = None
    ) -> tuple[list[RequestOutput], float]:
        """Apply `len(step_end_ts)` decode steps to every running request at once.

        Gives the outputs of the requests that finished in the last step, and the KV cache's
        usage after the last step's allocations (before those requests' blocks return, as a
        step's `SchedulerOutput.kv_usage`); the blocks must fit (`num_new_blocks_for`).
        Each request's tokens, then its blocks (`KVCacheManager.grow_decode`, which notes in
        `taken_at` the step that needs each block taken), in one walk.
        """
        self._plain_memo = None
        num_steps = len(step_end_ts)
        last_ts = step_end_ts[-1]
        ones = [1] * num_steps
        grow, size, fills = self.kv.grow_decode, self.kv.block_size, self.kv.caches_decodes
        running = self.running
        done: list[Request] = []
        for request in running:
            tokens = request.token_ids
            tokens.extend(request.next_output_tokens(num_steps))
            request.output_event_ts.extend(step_end_ts)
            request.output_event_tokens.extend(ones)
            before = request.num_computed_tokens
            total = before + num_steps
            # `grow_decode`'s own test, here to save the call: only a request whose new tokens
            # cross a block boundary takes a block or fills one (after its tokens: cached)
            if (total - 1) // size != (before - 1) // size or (
                fills and total // size != before // size
            ):
                grow(request, total, taken_at)
            request.num_computed_tokens = total
            if len(tokens) >= request.max_num_tokens:
                done.append(request)
        self.num_generation_tokens += num_steps * len(running)
        usage = self.kv.pool.get_usage()
        outputs = [self._finish(r, FinishReason.LENGTH, last_ts, (r.token_ids[-1],)) for r in done]
        if done:
            self.running = [r for r in self.running if not r.is_finished]
        return outputs, usage

    # ------------------------------------------------------------------ stats
    def num_waiting_at(self, now_ts: float, decided_ts: float | None) -> int:
        """Requests the engine core holds in its waiting queue at `now_ts`, not those still
        on their way (hand-off); with the next batch decided at `decided_ts` (async), those
        that arrived since and those before it the free seats or the step's token budget
        (after the running requests' tokens) could not take."""
        arrived = [r for r in self.waiting if r.arrival_ts <= now_ts]
        if not arrived:
            return 0
        # Blocks ran short at the last admission: the ones before are held, not decided.
        if decided_ts is None or self._blocked_at_free is not None:
            return len(arrived)
        seats = self.config.max_num_seqs - len(self.running)
        budget = self.config.max_num_batched_tokens
        budget -= sum(max(1, r.num_tokens - r.num_computed_tokens) for r in self.running)
        decided = 0
        for request in arrived:
            if request.arrival_ts > decided_ts or seats <= decided or budget <= 0:
                break
            budget -= request.num_tokens - request.num_computed_tokens
            decided += 1
        return len(arrived) - decided

    def make_stats(self, num_waiting: int | None = None) -> SchedulerStats:
        pool = self.kv.pool
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting) if num_waiting is None else num_waiting,
            kv_cache_usage=pool.get_usage(),
            num_free_blocks=pool.get_num_free_blocks(),
            num_gpu_blocks=pool.num_gpu_blocks,
            prefix_cache_queries=self.kv.prefix_cache_queries,
            prefix_cache_hits=self.kv.prefix_cache_hits,
            num_preemptions=self.num_preemptions,
            num_leaked_blocks=pool.num_leaked_blocks,
            num_prompt_tokens=self.num_prompt_tokens,
            num_prefill_tokens=self.num_prefill_tokens,
            num_generation_tokens=self.num_generation_tokens,
            num_finished_reqs=self.num_finished_reqs,
            spec_decode=SpecDecodeCounters(
                num_drafts=self._num_drafts,
                num_draft_tokens=self._num_draft_tokens,
                num_accepted_tokens=sum(self._accepted_per_pos),
                num_accepted_tokens_per_pos=tuple(self._accepted_per_pos),
            ),
            prompt_sources=self._prompt_sources,
            offload=self.kv.offload.stats() if self.kv.offload is not None else None,
        )
