"""twin.traffic: stages, arrivals, the workload's sequence across stages, token ids built
one request at a time (equal text, equal ids)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

from infertriage.schemas import UserError
from infertriage.twin.traffic import (
    Stage,
    Traffic,
    parse_arrival_process,
    parse_stage,
    plan_traffic,
    prompt_token_ids,
    resolve_workload,
)
from infertriage.workload import (
    RequestSpec,
    SynthText,
    Turn,
    estimate_tokens,
    make_specs,
    parse_workload,
)

VOCAB, CONTEXT = 32_000, 8192


def _plan(workload: str, **kwargs: Any) -> Traffic:
    return plan_traffic(parse_workload(workload), max_model_len=CONTEXT, vocab_size=VOCAB, **kwargs)


@pytest.mark.parametrize(
    ("text", "stage"),
    [
        ("8:600", Stage(8, 600)),
        ("20:10m", Stage(20, 600)),
        (" 0.5:90s ", Stage(0.5, 90)),
        ("2:500ms", Stage(2, 0.5)),
    ],
)
def test_a_stage_is_rate_colon_duration(text: str, stage: Stage) -> None:
    assert parse_stage(text) == stage


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("8", "is not RATE:DURATION"),
        ("fast:60", "the rate 'fast' is not a positive number"),
        ("0:60", "the rate '0' is not a positive number"),
        ("nan:60", "is not a positive number"),
        ("8:0", "is not a positive duration"),
        ("8:soon", "is not a positive duration"),
        ("8:-5s", "is not a positive duration"),
    ],
)
def test_a_bad_stage_is_one_sentence(text: str, match: str) -> None:
    with pytest.raises(UserError, match=match):
        parse_stage(text)


def test_arrivals_are_poisson_constant_or_gamma() -> None:
    assert parse_arrival_process("gamma:0.5").burstiness == 0.5
    assert parse_arrival_process("constant").kind == "constant"
    for bad in ("ramp:1", "bursty", "gamma:0", "constant:3"):
        with pytest.raises(UserError, match="--arrivals must be poisson, constant or gamma"):
            parse_arrival_process(bad)


def test_stages_run_back_to_back_and_the_workload_runs_on_across_them() -> None:
    ws = "prefix:groups=2,prompts=3,prefix=64,input=uniform(8,32),output=4"
    traffic = _plan(ws, stages=[Stage(2, 10), Stage(6, 5)], arrivals="constant", seed=3)
    assert traffic.stage_counts() == [20, 30]
    arrivals = traffic.arrival_ts
    assert arrivals[0] == 0.0 and arrivals[20] == 10.0 and arrivals[-1] == pytest.approx(14 + 5 / 6)
    assert np.all(np.diff(arrivals) > 0)
    assert traffic.stage_start_ts == (0.0, 10.0)
    # Request i is the workload's i-th, whichever stage it arrives in.
    assert traffic.specs == make_specs(parse_workload(ws), 50, seed=3)
    assert [traffic.request(i).request_id for i in (0, 19, 20, 49)] == [
        "sim-0",
        "sim-19",
        "sim-20",
        "sim-49",
    ]


def test_one_rate_is_one_stage_and_the_defaults_are_four_per_second_a_thousand_requests() -> None:
    traffic = _plan("synthetic:input=16,output=4")
    assert len(traffic) == 1000
    assert traffic.stages == (Stage(4.0, 250.0),)
    assert set(traffic.stage_of.tolist()) == {0}


def test_a_cycled_prompt_gives_the_same_token_ids_every_time() -> None:
    traffic = _plan("prefix:groups=2,prompts=3,prefix=64,input=20,output=4", num_requests=13)
    first = [traffic.request(i).prompt_token_ids for i in range(6)]
    assert len(set(first)) == 6
    again = [traffic.request(i).prompt_token_ids for i in range(6, 12)]
    assert again == first
    assert traffic.request(12).prompt_token_ids == first[0]
    assert all(len(ids) == 84 for ids in first)


def test_literal_text_becomes_ids_equal_for_equal_text() -> None:
    system = Turn("system", "You are a helpful assistant. " * 20)
    one = RequestSpec(0, (system, Turn("user", "What is a KV cache?")), 160, 8)
    two = RequestSpec(1, (system, Turn("user", "Why is my TTFT high?")), 150, 8)
    ids_one, ids_two = prompt_token_ids(one, VOCAB), prompt_token_ids(two, VOCAB)
    assert len(ids_one) == 160 and len(ids_two) == 150  # the spec's count, the last turn's rest
    shared = estimate_tokens(system.content)
    assert ids_one[:shared] == ids_two[:shared]  # the common system prompt: a prefix-cache hit
    assert ids_one[shared:] != ids_two[shared:]
    assert prompt_token_ids(one, VOCAB) == ids_one
    assert all(0 <= t < VOCAB for t in ids_one)


def test_synthetic_text_keeps_its_length() -> None:
    spec = RequestSpec(0, (Turn("user", SynthText(300, 7)),), 300, 8)
    assert len(prompt_token_ids(spec, VOCAB)) == 300


def test_a_workload_and_a_length_together_are_refused() -> None:
    assert resolve_workload(None, 64, None).text == "synthetic:input=64,output=lognormal(256,1024)"
    assert resolve_workload("chat-mix", None, None).text == "chat-mix"
    with pytest.raises(UserError, match="give --workload or --input-len/--output-len, not both"):
        resolve_workload("chat-mix", None, 32)


@pytest.mark.parametrize(
    "workload",
    [
        "chat-mix",
        "chat-mix:prefix_share=0.5",
        "synthetic:input=lognormal(300,900),output=64,prefix=100",
    ],
)
def test_synthetic_requests_built_on_demand_are_the_ones_make_specs_builds(workload: str) -> None:
    ws = parse_workload(workload)
    traffic = _plan(workload, rate=10, num_requests=300, seed=7)
    stages = _plan(workload, stages=[Stage(5, 20), Stage(10, 10)], seed=7)
    assert list(traffic.specs) == list(make_specs(ws, 300, seed=7, max_model_len=CONTEXT))
    assert [traffic.specs[i] for i in range(300)] == list(traffic.specs)
    assert list(stages.specs) == list(make_specs(ws, len(stages), seed=7, max_model_len=CONTEXT))
    assert (
        traffic.specs[-1] == traffic.specs[299] and traffic.specs[1:3] == list(traffic.specs)[1:3]
    )
    with pytest.raises(IndexError):
        traffic.specs[300]


def test_a_chat_mix_run_holds_a_few_bytes_a_request_not_its_specs() -> None:
    # the drawn lengths (17 bytes a request) and the arrival and stage arrays (16); the
    # `RequestSpec`s they stand for took about 390 bytes each
    tracemalloc.start()
    try:
        traffic = _plan("chat-mix", rate=10, num_requests=100_000)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(traffic) == 100_000
    assert held / 100_000 < 50


def test_an_output_length_alone_keeps_the_chat_mix_prompts() -> None:
    ws = resolve_workload(None, None, 64)
    assert ws.kind.value == "chat-mix" and ws.number("output", 0) == 64
