"""A level's validity on hostile records (issue 34's sweep): every request failed, too few
first tokens, and sessions whose later requests wait on replies, not on the rate."""

from __future__ import annotations

from dataclasses import replace

from infertriage.loadgen.validity import LevelFacts, judge_validity
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, Thresholds, Validity

T = Thresholds()


def _records(num: int, gap_s: float = 0.1, **labels: str) -> list[RequestRecord]:
    """`num` quick requests `gap_s` apart (4 tokens each)."""
    out = []
    for i in range(num):
        t = i * gap_s
        chunks = tuple(Chunk(t + 0.02 + 0.01 * k, 1) for k in range(4))
        out.append(
            RequestRecord(
                id=f"r-{i}",
                scheduled_ts=t,
                sent_ts=t,
                first_token_ts=chunks[0].ts,
                last_token_ts=chunks[-1].ts,
                end_ts=chunks[-1].ts,
                chunks=chunks,
                output_tokens=4,
                max_tokens=4,
                labels=dict(labels),
            )
        )
    return out


def _failed(records: list[RequestRecord]) -> list[RequestRecord]:
    return [
        replace(
            r,
            first_token_ts=None,
            last_token_ts=None,
            chunks=(),
            output_tokens=None,
            error_kind=ErrorKind.HTTP,
            http_status=500,
        )
        for r in records
    ]


def _steady(validity: Validity) -> tuple[bool, str]:
    check = next(c for c in validity.checks if c.name == "steady state")
    return check.passed, check.figure


def test_a_level_whose_every_request_failed_shows_no_steady_state() -> None:
    for facts in (LevelFacts(mode="rate", value=10.0), LevelFacts(mode="concurrency", value=4)):
        passed, figure = _steady(judge_validity(_failed(_records(200)), T, facts))
        assert not passed and figure.startswith("0 request(s) gave a first token"), figure


def test_a_handful_of_first_tokens_is_not_a_steady_state() -> None:
    passed, figure = _steady(judge_validity(_records(5), T, LevelFacts(mode="rate", value=10.0)))
    assert not passed and "too few" in figure


def test_a_session_workload_is_not_held_to_the_nominal_request_rate() -> None:
    """Sessions' later turns wait on replies and think time: 200 requests 1 s apart under a
    nominal 20/s are not a client that lagged."""
    records = _records(200, gap_s=1.0, session="0", turn="0")
    validity = judge_validity(records, T, LevelFacts(mode="rate", value=20.0))
    rate = next(c for c in validity.checks if c.name == "rate")
    assert rate.passed and rate.figure.startswith("not judged"), rate.figure
    plain = judge_validity(_records(200, gap_s=1.0), T, LevelFacts(mode="rate", value=20.0))
    assert not next(c for c in plain.checks if c.name == "rate").passed  # as before, alone
