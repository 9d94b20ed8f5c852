"""Agentic sessions: the `agentic:` spec (good and bad), seeded structure, shares, prefix marks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from infertriage.schemas import UserError
from infertriage.workload import (
    ArrivalKind,
    Arrivals,
    ContextLimit,
    PromptModel,
    RequestSpec,
    Schedule,
    SynthText,
    Turn,
    fit_schedule,
    make_schedule,
    make_specs,
    parse_workload,
    prefix_marks,
)
from infertriage.workload.agentic import DelayDist, parse_delay

_SPEC = (
    "agentic:turns=5,input=40,output=20,system=300,tools=200,think=0.25,tool_share=0.4,"
    "tool_result=60,tool_latency=0.125,fanout=3,fanout_share=0.3"
)


def _schedule(text: str = _SPEC, count: int = 200, seed: int = 7) -> Schedule:
    return make_schedule(
        parse_workload(text), None, num_requests=count, duration_s=None, concurrency=4, seed=seed
    )


def _label(spec: RequestSpec, key: str) -> str | None:
    return dict(spec.labels).get(key)


@pytest.mark.parametrize(
    "text",
    [
        "agentic",
        _SPEC,
        "agentic:think=uniform(0.5,2),tool_latency=lognormal(0.1,0.4),turns=uniform(2,9)",
        "agentic:think=normal(1,0.5),fanout=0,tool_share=1",
        "agentic:fanout=4,fanout_share=1,tool_share=0",
    ],
)
def test_good_agentic_specs_parse(text: str) -> None:
    ws = parse_workload(text)
    assert ws.kind == "agentic"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("agentic:think=soon", "think='soon' is not a delay in seconds"),
        ("agentic:tool_latency=uniform(3,1)", r"tool_latency='uniform\(3,1\)' is not a delay"),
        ("agentic:think=-1", "is not a delay in seconds"),
        ("agentic:tool_share=1.5", "tool_share=1.5 is a share of turns, not above 1"),
        ("agentic:tool_share=0.7,fanout=2,fanout_share=0.5", "tool_share 0.7 \\+ fanout_share 0.5"),
        ("agentic:fanout=many", "fanout='many' is not a number"),
        ("agentic:turns=0", "turns: a fixed length needs a positive"),
        ("agentic:input=lognormal(50,10)", "input: lognormal"),
        ("agentic:parallel=3", "agentic has no option 'parallel'"),
    ],
)
def test_bad_agentic_specs_are_refused_in_one_sentence(text: str, says: str) -> None:
    with pytest.raises(UserError, match=says) as err:
        parse_workload(text)
    assert "\n" not in str(err.value) and str(err.value).endswith(".")


def test_delays_are_seconds_never_below_zero() -> None:
    rng = np.random.default_rng(0)
    assert parse_delay("0.5", "think") == DelayDist("fixed", 0.5)
    draws = [parse_delay("normal(0.1,1)", "think").sample(rng) for _ in range(200)]
    assert min(draws) == 0.0 and max(draws) > 0.5
    draws = [parse_delay("uniform(1,2)", "think").sample(rng) for _ in range(50)]
    assert all(1 <= d <= 2 for d in draws)


def test_same_seed_same_sessions() -> None:
    a, b, c = _schedule(seed=3), _schedule(seed=3), _schedule(seed=4)
    assert a.specs == b.specs and a.sessions == b.sessions
    assert a.specs != c.specs
    assert make_specs(parse_workload(_SPEC), 200, seed=3) == a.specs  # same requests either way


def test_every_request_once_in_session_order_and_labelled() -> None:
    schedule = _schedule()
    assert len(schedule.specs) == 200 and schedule.sessions is not None
    order = [i for s in schedule.sessions for step in s for i in step.indices]
    assert order == list(range(200))  # sessions follow one another; steps in send order
    for n, session in enumerate(schedule.sessions):
        for step in session:
            for i in step.indices:
                spec = schedule.specs[i]
                assert _label(spec, "session") == str(n) and _label(spec, "turn") is not None
                assert _label(spec, "step") in {"turn", "tool_result", "fanout_child"}


def test_each_prompt_is_the_history_so_far_plus_its_message() -> None:
    schedule = _schedule()
    assert schedule.sessions is not None
    shared = schedule.specs[0].turns[0]
    assert shared == Turn("system", SynthText(500, shared.content.key))  # type: ignore[union-attr]
    for session in schedule.sessions:
        main = [schedule.specs[s.indices[0]] for s in session if len(s.indices) == 1]
        for before, after in itertools.pairwise(main):
            # the next main-line request repeats the previous one whole, then its answer
            assert after.turns[: len(before.turns)] == before.turns
            reply = after.turns[len(before.turns)]
            assert reply.role == "assistant"
            assert reply.content.num_tokens == before.max_tokens  # type: ignore[union-attr]
        for spec in (schedule.specs[i] for step in session for i in step.indices):
            assert spec.turns[0] == shared  # one system prompt + tool definitions for all
            roles = [t.role for t in spec.turns[1:]]
            assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
            assert spec.prompt_tokens == sum(t.content.num_tokens for t in spec.turns)  # type: ignore[union-attr]


def test_think_time_tool_gaps_and_fan_out_children() -> None:
    schedule = _schedule()
    assert schedule.sessions is not None
    kinds = {"turn": 0, "tool_result": 0, "fanout_child": 0}
    for session in schedule.sessions:
        assert session[0].delay_s == 0.0  # a session opens at once
        for n, step in enumerate(session):
            specs = [schedule.specs[i] for i in step.indices]
            kind = _label(specs[0], "step")
            assert kind is not None
            kinds[kind] += len(specs)
            if kind == "tool_result":
                assert step.delay_s == 0.125 and len(specs) == 1
                assert specs[0].turns[-1].content.num_tokens == 60  # type: ignore[union-attr]
            elif kind == "fanout_child":
                assert step.delay_s == 0.0 and 1 <= len(specs) <= 3
                # the children share the whole history, the planner's answer included
                history = {s.turns[:-1] for s in specs}
                assert len(history) == 1
                parent = schedule.specs[session[n - 1].indices[0]]
                assert specs[0].turns[: len(parent.turns)] == parent.turns
                assert len({s.turns[-1] for s in specs}) == len(specs)  # own sub-tasks
            elif n:
                assert step.delay_s == 0.25  # think time after the previous answers
    assert all(count > 10 for count in kinds.values())


def test_fan_out_answers_open_the_next_user_message() -> None:
    ws = parse_workload("agentic:turns=2,input=10,output=7,fanout=2,fanout_share=1,tool_share=0")
    schedule = make_schedule(ws, None, num_requests=4, duration_s=None, seed=1)
    planner, _, _, second = schedule.specs
    assert second.turns[-1].content.num_tokens == 2 * 7 + 10  # type: ignore[union-attr]
    assert second.turns[: len(planner.turns)] == planner.turns


def test_open_loop_offsets_and_worker_shares_keep_whole_sessions() -> None:
    schedule = make_schedule(
        parse_workload(_SPEC), Arrivals(ArrivalKind.POISSON, 5.0), num_requests=120,
        duration_s=None, seed=2,
    )  # fmt: skip
    assert schedule.offsets_s is not None and schedule.sessions is not None
    shares = [schedule.share(w, 3) for w in range(3)]
    assert sum(len(s.specs) for s in shares) == 120
    for w, share in enumerate(shares):
        assert share.sessions is not None and share.offsets_s is not None
        names = {_label(s, "session") for s in share.specs}
        assert names == {str(n) for n in range(w, len(schedule.sessions), 3)}
        for session in share.sessions:  # a session starts at its first request's arrival
            first = session[0].indices[0]
            assert share.offsets_s[first] == schedule.offsets_s[share.specs[first].index]
            steps = [[share.specs[i].index for i in st.indices] for st in session]
            whole = schedule.sessions[int(_label(share.specs[first], "session") or 0)]
            assert steps == [list(st.indices) for st in whole]


def test_fitting_keeps_the_sessions() -> None:
    schedule = _schedule(count=40)
    fitted, _ = fit_schedule(schedule, ContextLimit(8192, "test"), PromptModel("intended", False))
    assert fitted.sessions == schedule.sessions and len(fitted.specs) == 40


def test_prefix_marks_chain_messages_and_count_tokens() -> None:
    system, q1, q2 = (
        Turn("system", SynthText(100, 1)),
        Turn("user", SynthText(40, 2)),
        Turn("user", SynthText(40, 3)),
    )
    a = prefix_marks((system, q1))
    b = prefix_marks((system, q2))
    assert [n for _, n in a] == [100, 140] and a[0] == b[0] and a[1] != b[1]
    assert prefix_marks((Turn("user", SynthText(100, 1)),))[0] != a[0]  # the role counts
    literal = prefix_marks((Turn("user", "x" * 400),))
    assert literal[0][1] == 100  # four characters a token, without a tokenizer
    assert prefix_marks((Turn("user", "abc"),), lambda text: 7)[0][1] == 7
