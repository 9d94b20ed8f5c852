"""What travels between bench, the Locust master and its workers: plain values, and back."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from infertriage.loadgen.locust.launch import parse_master_host
from infertriage.loadgen.locust.wire import (
    decode_config,
    decode_plan,
    decode_report,
    encode_config,
    encode_plan,
    encode_report,
    share_plan,
)
from infertriage.loadgen.request import ClientConfig, Endpoint
from infertriage.loadgen.runner import LoadPlan, WorkerReport
from infertriage.workload import RequestSpec, Schedule, SynthText, Turn


def _specs(n: int) -> tuple[RequestSpec, ...]:
    turns = (Turn("system", SynthText(64, 7)), Turn("user", "héllo ✓"))
    return tuple(
        RequestSpec(i, turns, 70, 16, ignore_eos=i % 2 == 0, labels=(("k", str(i)),))
        for i in range(n)
    )


def test_a_plan_survives_the_wire_as_json() -> None:
    offsets = np.array([0.0, 0.125, 0.5])
    plan = LoadPlan(
        Schedule(_specs(3), offsets), max_concurrency=4, duration_s=9.0, id_prefix="ab-0",
        labels=(("level", "rate=2"),), drain_timeout_s=12.5, drain_settle_share=0.9,
    )  # fmt: skip
    back = decode_plan(orjson.loads(orjson.dumps(encode_plan(plan))))
    assert (back.drain_timeout_s, back.drain_settle_share) == (12.5, 0.9)
    assert back.schedule.specs == plan.schedule.specs
    assert back.schedule.offsets_s is not None
    assert back.schedule.offsets_s.tolist() == offsets.tolist()
    assert (back.max_concurrency, back.duration_s, back.id_prefix, back.labels) == (
        4, 9.0, "ab-0", (("level", "rate=2"),),
    )  # fmt: skip
    closed = LoadPlan(Schedule(_specs(2)), concurrency=3)
    assert decode_plan(encode_plan(closed)).closed
    assert decode_plan(encode_plan(closed)).drain_settle_share is None


def test_the_key_never_travels() -> None:
    config = ClientConfig(
        "http://h:1/v1", "m", Endpoint.COMPLETIONS, api_key="sk-secret",
        headers=(("X-A", "b"),), timeout_s=5.0,
    )  # fmt: skip
    wire = orjson.dumps(encode_config(config))
    assert b"sk-secret" not in wire
    assert decode_config(orjson.loads(wire), "sk-secret") == config
    plain = encode_config(ClientConfig("http://h:1/v1", "m"))
    assert plain["needs_key"] is False


def test_a_report_survives_the_wire() -> None:
    report = WorkerReport(1, 5, 0.5, 2.0, (0.001, 0.002), False, True, False, 7, 9, 1)
    assert decode_report(orjson.loads(orjson.dumps(encode_report(report)))) == report


def test_a_closed_loop_is_shared_by_the_users_each_worker_got() -> None:
    plan = LoadPlan(Schedule(_specs(10)), concurrency=5)
    shares = share_plan(plan, [3, 0, 2])
    assert shares[1] is None
    first, third = shares[0], shares[2]
    assert first is not None and third is not None
    assert (first.concurrency, third.concurrency) == (3, 2)
    # request i goes to user slot i mod 5: slots 0-2 on the first worker, 3-4 on the third
    assert [s.index for s in first.schedule.specs] == [0, 1, 2, 5, 6, 7]
    assert [s.index for s in third.schedule.specs] == [3, 4, 8, 9]


def test_an_open_loop_keeps_its_deadlines_round_robin() -> None:
    offsets = np.arange(5) * 0.1
    plan = LoadPlan(Schedule(_specs(5), offsets), max_concurrency=4)
    shares = share_plan(plan, [1, 1])
    got = sorted(
        (spec.index, float(offset))
        for share in shares
        if share is not None and share.schedule.offsets_s is not None
        for spec, offset in zip(share.schedule.specs, share.schedule.offsets_s, strict=True)
    )
    assert got == [(i, pytest.approx(i * 0.1)) for i in range(5)]
    assert [s.max_concurrency for s in shares if s is not None] == [2, 2]
    assert share_plan(plan, [0, 0]) == [None, None]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("10.0.0.5", ("10.0.0.5", 5557)), ("0.0.0.0:6000", ("0.0.0.0", 6000)), ("h:x", ("h:x", 5557))],
)
def test_master_host_with_or_without_a_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_master_host(value) == expected
