"""twin.scheduler: FCFS, the token budget, chunked prefill, max_num_seqs, preemption order."""

from __future__ import annotations

import random

from infertriage.twin.blocks import BlockPool, KVCacheManager
from infertriage.twin.request import FinishReason, Request, RequestStatus, SamplingParams
from infertriage.twin.scheduler import RequestOutput, Scheduler, SchedulerConfig, SchedulerOutput

BS = 4


def make_scheduler(
    num_blocks: int = 256,
    *,
    budget: int = 64,
    max_num_seqs: int = 8,
    max_model_len: int = 256,
    chunked: bool = True,
) -> Scheduler:
    kv = KVCacheManager(BlockPool(num_blocks, enable_caching=False), BS, max_model_len)
    config = SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        max_model_len=max_model_len,
        enable_chunked_prefill=chunked,
    )
    return Scheduler(config, kv)


def add(scheduler: Scheduler, request_id: str, num_prompt: int, max_tokens: int = 4) -> Request:
    request = Request(
        request_id,
        list(range(num_prompt)),
        SamplingParams(max_tokens=max_tokens),
        0.0,
        max_tokens,
        7,
        1000,
    )
    scheduler.add_request(request)
    return request


def run_step(
    scheduler: Scheduler, now_ts: float = 0.0
) -> tuple[SchedulerOutput, list[RequestOutput]]:
    output = scheduler.schedule(now_ts)
    sampled = {
        item.request.request_id: item.request.next_output_tokens(1)
        for item in output.scheduled
        if item.samples
    }
    return output, scheduler.update_from_output(output, sampled, now_ts + 0.01)


def test_waiting_requests_are_admitted_first_come_first_served() -> None:
    scheduler = make_scheduler(budget=1000, max_num_seqs=2)
    for name in ("a", "b", "c"):
        add(scheduler, name, 10, max_tokens=2)
    output, _ = run_step(scheduler)
    assert [s.request.request_id for s in output.scheduled] == ["a", "b"]
    assert [r.request_id for r in scheduler.waiting] == ["c"]
    run_step(scheduler)  # a and b generate their second token and finish
    output, _ = run_step(scheduler)
    assert [s.request.request_id for s in output.scheduled] == ["c"]


def test_a_long_prompt_is_chunked_under_the_budget_and_decodes_go_first() -> None:
    scheduler = make_scheduler(budget=32)
    add(scheduler, "short", 8, max_tokens=20)
    output, _ = run_step(scheduler)
    assert output.num_scheduled_tokens == 8
    add(scheduler, "long", 100)
    chunks: list[int] = []
    for _ in range(4):
        output, _ = run_step(scheduler)
        first, *rest = output.scheduled
        assert first.request.request_id == "short" and first.num_new_tokens == 1
        chunks.extend(s.num_new_tokens for s in rest)
        assert output.num_scheduled_tokens <= 32
    assert chunks == [31, 31, 31, 7]
    assert scheduler.get_request("long") is not None
    long = scheduler.get_request("long")
    assert long is not None and long.num_output_tokens == 1  # the last chunk sampled


def test_without_chunked_prefill_a_prompt_that_does_not_fit_waits() -> None:
    scheduler = make_scheduler(budget=64, chunked=False)
    add(scheduler, "a", 40)
    add(scheduler, "b", 40)
    output, _ = run_step(scheduler)
    assert [s.request.request_id for s in output.scheduled] == ["a"]
    output, _ = run_step(scheduler)
    assert [(s.request.request_id, s.num_new_tokens) for s in output.scheduled] == [
        ("a", 1),
        ("b", 40),
    ]


def test_budget_and_max_num_seqs_hold_on_a_random_workload() -> None:
    rng = random.Random(3)
    scheduler = make_scheduler(num_blocks=120, budget=48, max_num_seqs=5)
    for index in range(40):
        add(scheduler, f"r{index}", rng.randint(1, 90), max_tokens=rng.randint(1, 30))
    finished = 0
    for step in range(2000):
        output, outputs = run_step(scheduler, step * 0.01)
        assert output.num_scheduled_tokens <= 48
        assert len(scheduler.running) <= 5
        assert len({s.request.request_id for s in output.scheduled}) == len(output.scheduled)
        finished += sum(o.finished for o in outputs)
        if not scheduler.has_unfinished_requests():
            break
    assert finished == 40
    assert scheduler.kv.pool.get_num_free_blocks() == 119


def test_preemption_takes_the_most_recently_admitted_request_first() -> None:
    # 12 usable blocks of 4 tokens; three requests of 12 prompt tokens hold 3 blocks each.
    scheduler = make_scheduler(num_blocks=13, budget=1000)
    a, b, c = (add(scheduler, name, 12, max_tokens=40) for name in ("a", "b", "c"))
    run_step(scheduler)
    assert [r.request_id for r in scheduler.running] == ["a", "b", "c"]
    preempted: list[str] = []
    for _ in range(10):
        output, _ = run_step(scheduler)
        preempted.extend(output.preempted_ids)
        if preempted:
            break
    assert preempted == ["c"]
    assert c.status is RequestStatus.PREEMPTED and c.num_computed_tokens == 0
    assert c.num_preemptions == 1 and scheduler.num_preemptions == 1
    assert scheduler.waiting[0] is c  # back at the front of the queue
    assert [r.request_id for r in scheduler.running] == ["a", "b"]
    assert a.num_computed_tokens > 0 and b.num_computed_tokens > 0
    assert scheduler.make_stats().num_preemptions == 1


def test_a_request_that_cannot_grow_preempts_itself_last() -> None:
    # Two requests, 2 usable blocks: when b (admitted last) needs a block it is preempted.
    scheduler = make_scheduler(num_blocks=3, budget=1000)
    add(scheduler, "a", 4, max_tokens=10)
    add(scheduler, "b", 3, max_tokens=10)
    run_step(scheduler)
    output, _ = run_step(scheduler)  # a needs a second block: b is preempted for it
    assert output.preempted_ids == ("b",)
    assert [s.request.request_id for s in output.scheduled] == ["a"]
    assert [r.request_id for r in scheduler.waiting] == ["b"]


def test_requests_finish_at_max_tokens_and_on_stop_tokens_after_min_tokens() -> None:
    scheduler = make_scheduler(budget=1000)
    plain = add(scheduler, "plain", 5, max_tokens=3)
    stop_at = plain.next_output_tokens(3)[1]  # the second token of a request seeded 7
    stopper = Request(
        "stopper",
        [1, 2, 3],
        SamplingParams(max_tokens=10, min_tokens=1, stop_token_ids=frozenset({stop_at})),
        0.0,
        10,
        7,
        1000,
    )
    scheduler.add_request(stopper)
    reasons = {}
    for _ in range(5):
        for out in run_step(scheduler)[1]:
            if out.finished:
                reasons[out.request_id] = (out.finish_reason, out.timings)
    assert reasons["plain"][0] is FinishReason.LENGTH
    assert reasons["stopper"][0] is FinishReason.STOP
    timings = reasons["plain"][1]
    assert timings is not None and timings.num_output_tokens == 3
    assert len(timings.output_event_ts) == 3 and timings.ttft_s is not None


def test_abort_frees_blocks_at_once() -> None:
    scheduler = make_scheduler(budget=1000)
    add(scheduler, "a", 20, max_tokens=50)
    add(scheduler, "b", 20, max_tokens=50)
    run_step(scheduler)
    outputs = scheduler.finish_requests(["a", "nope"], FinishReason.ABORT, 1.0)
    assert [o.finish_reason for o in outputs] == [FinishReason.ABORT]
    assert [r.request_id for r in scheduler.running] == ["b"]
    assert scheduler.kv.get_blocks("a") == []


def test_a_speculating_request_preempted_caches_only_what_its_allocations_cached() -> None:
    # allocate_slots caches the blocks of the tokens known before the step ((c + 1) // size);
    # the step's accepted drafts are computed after it. A preemption before the next
    # allocation must not cache the block they filled: the re-admission would hit it, and
    # neither the single steps nor vLLM give that hit.
    kv = KVCacheManager(BlockPool(64), BS, 256)
    config = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=256,
                             num_spec_tokens=2)  # fmt: skip
    scheduler = Scheduler(config, kv)
    request = Request("a", [11, 12, 13, 14, 15], SamplingParams(max_tokens=20), 0.0, 20, 7, 1000)
    scheduler.add_request(request)
    prefill = scheduler.schedule(0.0)
    scheduler.update_from_output(prefill, {"a": request.next_output_tokens(1)}, 0.1)
    decode = scheduler.schedule(0.2)
    assert [item.num_draft_tokens for item in decode.scheduled] == [2]
    scheduler.update_from_output(decode, {"a": request.next_output_tokens(3)}, 0.3)
    assert request.num_computed_tokens == 8  # two full blocks computed, one cached
    cached = kv.pool.num_cached_blocks
    scheduler._preempt(request)
    assert kv.pool.num_cached_blocks == cached == 1
