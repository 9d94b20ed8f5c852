"""Prefix reuse as the client sent it: small hand-made sessions, numbers worked out by hand.

Block 16. Session A: a1 = sys(100) + u1(40) = 140 tokens, nothing sent before: 0;
a2 = sys + u1 + reply(30) + u2(20) = 190, shares sys + u1 = 140 with a1: 128 (8 blocks).
Session B: b1 = sys(100) + v1(50) = 150, shares sys = 100: 96 (6 blocks).
All: 224 / 480. Sessions: A 128/330, B 96/150. Replicas (a1, b1 on r0; a2 on r1): r0
could hit b1's 96 (a1 went there), r1 nothing (a2 went where nothing was sent): 96/480.
"""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.client import client_signals
from infertriage.analyze.signals.reuse import prefix_reuse, reuse_signals, reused_tokens
from infertriage.schemas import Chunk, RequestRecord
from infertriage.workload import SynthText, Turn, prefix_marks

SYS = Turn("system", SynthText(100, 1))
U1, A1, U2 = (
    Turn("user", SynthText(40, 2)),
    Turn("assistant", SynthText(30, 3)),
    Turn("user", SynthText(20, 4)),
)
V1 = Turn("user", SynthText(50, 5))


def _record(
    rid: str, sent: float, turns: tuple[Turn, ...], status: int = 200, **labels: str
) -> RequestRecord:
    return RequestRecord(
        id=rid,
        scheduled_ts=sent,
        sent_ts=sent,
        first_token_ts=sent + 0.1,
        last_token_ts=sent + 0.2,
        end_ts=sent + 0.2,
        chunks=(Chunk(sent + 0.1, 1), Chunk(sent + 0.2, 1)),
        output_tokens=2,
        http_status=status,
        labels=labels,
        prompt_prefix=prefix_marks(turns),
    )


def _run(replicas: bool = True) -> list[RequestRecord]:
    r = (lambda name: {"replica": name}) if replicas else (lambda name: {})
    return [  # given out of order: the count goes by the time each was sent
        _record("a2", 2.0, (SYS, U1, A1, U2), session="A", **r("r1")),
        _record("a1", 0.0, (SYS, U1), session="A", **r("r0")),
        _record("b1", 1.0, (SYS, V1), session="B", **r("r0")),
    ]


def test_reused_tokens_are_whole_blocks_and_never_the_last_token() -> None:
    marks = prefix_marks((SYS, U1))
    assert reused_tokens(marks, set()) == 0
    assert reused_tokens(marks, {marks[0][0]}) == 96  # 100 shared → 6 blocks
    assert reused_tokens(marks, {d for d, _ in marks}) == 128  # all 140 → 139 → 8 blocks
    short = prefix_marks((Turn("user", SynthText(32, 9)),))
    assert reused_tokens(short, {short[0][0]}) == 16  # a whole 32-token repeat: 31 → 1 block
    assert reused_tokens(marks, {marks[1][0]}) == 0  # a later digest alone is no prefix


def test_reuse_over_hand_made_sessions() -> None:
    reuse = prefix_reuse(_run())
    assert reuse is not None
    assert (reuse.prompt_tokens, reuse.reused_tokens, reuse.num_prompts) == (480, 224, 3)
    assert reuse.share == pytest.approx(224 / 480)
    assert reuse.by_session == pytest.approx({"A": 128 / 330, "B": 96 / 150})
    assert reuse.session_share == pytest.approx((128 / 330 + 96 / 150) / 2)
    assert reuse.by_replica == pytest.approx({"r0": 96 / 290, "r1": 0.0})
    assert reuse.replica_share == pytest.approx(96 / 480)
    assert reuse.describe() == (
        "prefix reuse: 47% of prompt tokens repeat an earlier prefix (2 sessions); "
        "20% within the replica that served them (2)"
    )


def test_signals_name_sessions_and_replicas_only_when_known() -> None:
    values = {s.name: s.value for s in reuse_signals(_run(), (0.0, 3.0))}
    assert values == pytest.approx(
        {
            "workload.prefix_reuse": 224 / 480,
            "workload.prompts": 3,
            "workload.session_prefix_reuse": (128 / 330 + 96 / 150) / 2,
            "workload.sessions": 2,
            "workload.replicas": 2,
            "workload.replica_prefix_reuse": 96 / 480,
            "workload.prefix_reuse_by_replica.r0": 96 / 290,
            "workload.prefix_reuse_by_replica.r1": 0.0,
        }
    )
    # one response without the header: nothing is said about replicas
    mixed = _run()
    mixed[0] = _record("a2", 2.0, (SYS, U1, A1, U2), session="A")
    names = {s.name for s in reuse_signals(mixed, (0.0, 3.0))}
    assert names == {
        "workload.prefix_reuse",
        "workload.prompts",
        "workload.session_prefix_reuse",
        "workload.sessions",
    }
    # no session labels (a chat mix): the run-level figure alone
    plain = [_record("x", 0.0, (SYS, U1)), _record("y", 1.0, (SYS, V1))]
    assert {s.name: s.value for s in reuse_signals(plain, (0.0, 2.0))} == pytest.approx(
        {"workload.prefix_reuse": 96 / 290, "workload.prompts": 2}
    )


def test_refused_requests_and_records_without_marks_count_for_nothing() -> None:
    refused = [_record("a1", 0.0, (SYS, U1), status=429), _record("b1", 1.0, (SYS, V1))]
    reuse = prefix_reuse(refused)
    assert reuse is not None and reuse.reused_tokens == 0 and reuse.prompt_tokens == 150
    bare = RequestRecord(id="old", scheduled_ts=0.0, sent_ts=0.0, http_status=200)
    assert prefix_reuse([bare]) is None and reuse_signals([bare], (0.0, 1.0)) == []


def test_client_signals_carry_the_reuse() -> None:
    names = {s.name for s in client_signals(_run(replicas=False), client_bound=False)}
    assert {"workload.prefix_reuse", "workload.session_prefix_reuse"} <= names
    assert "client.ttft_p95_s" in names


def test_an_earlier_level_of_the_run_is_a_prefix_though_not_counted() -> None:
    warm_up = _record("w", -1.0, (SYS, U1), session="A", replica="r1")
    later = _record("z", 9.0, (SYS, V1, A1), session="C", replica="r0")
    measured = _run()
    reuse = prefix_reuse(measured, run=[warm_up, *measured, later])
    assert reuse is not None
    # a1 now repeats the warm-up whole (140 → 139 → 128); a2 and b1 as before
    assert (reuse.prompt_tokens, reuse.reused_tokens) == (480, 128 + 128 + 96)
    assert set(reuse.by_session) == {"A", "B"}  # the other levels' sessions are not counted
    # r1 had the warm-up: a2 (on r1) reuses sys + u1 there; r0 as before
    assert reuse.by_replica == pytest.approx({"r0": 96 / 290, "r1": 128 / 190})
    names = client_signals(measured, client_bound=False, run=[warm_up, *measured])
    assert {s.name: s.value for s in names}["workload.prefix_reuse"] == pytest.approx(352 / 480)
