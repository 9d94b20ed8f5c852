"""The go-live functional checks against real loopback servers: the twin and a faulty one."""

from __future__ import annotations

import socket

import pytest

from infertriage.loadgen.probes import CheckResult, functional_checks
from infertriage.schemas import UserError
from infertriage.twin.process import TwinProcess

CHECKS = [
    "ready",
    "chat",
    "chat.stream",
    "completions",
    "completions.stream",
    "stream.usage",
    "special.cjk",
    "special.emoji",
    "special.combining",
    "special.rtl",
    "special.quotes",
    "special.control",
    "special.lone_surrogate",
    "length.near_limit",
    "length.over_limit",
    "max_tokens_1",
    "stop",
    "concurrent",
]


def _by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    assert [r.name for r in results] == CHECKS
    assert all(r.duration_s >= 0 and r.detail for r in results)
    return {r.name: r for r in results}


# ---------------------------------------------------------------------- tests


def test_healthy_twin_passes_every_check() -> None:
    with TwinProcess("healthy", load_time_s=0.2) as twin:
        results = _by_name(functional_checks(twin.url + "/v1", timeout_s=30.0))
    failed = {name: r.detail for name, r in results.items() if r.ok is not True}
    assert failed == {}
    # The twin has /tokenize: every special prompt is cross-checked, lengths are calibrated.
    for name in CHECKS:
        if name.startswith("special.") and name != "special.lone_surrogate":
            assert "/tokenize agrees" in results[name].detail
    assert "by /tokenize" in results["length.near_limit"].detail
    assert "HTTP 400" in results["length.over_limit"].detail
    assert "HTTP 400" in results["special.lone_surrogate"].detail
    assert "finish_reason 'stop'" in results["stop"].detail


def test_faulty_server_fails_over_limit_and_stream_usage(bad_server: str) -> None:
    results = _by_name(functional_checks(bad_server, timeout_s=30.0))
    over, usage = results.pop("length.over_limit"), results.pop("stream.usage")
    assert over.ok is False
    assert "answered HTTP 500 to an over-length prompt" in over.detail
    assert "must reject it with a 4xx" in over.detail
    assert usage.ok is False and "usage" in usage.detail
    assert {name: r.detail for name, r in results.items() if r.ok is not True} == {}
    # No /tokenize here: lengths are estimated and the cross-check is skipped, saying so.
    assert "estimate" in results["length.near_limit"].detail
    assert "estimate" in over.detail
    assert "no /tokenize" in results["special.cjk"].detail
    # A Python server that accepts the lone surrogate and answers valid JSON passes too.
    assert "HTTP 200" in results["special.lone_surrogate"].detail


def test_unreachable_server_is_a_user_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UserError, match=f"127.0.0.1:{port}"):
        functional_checks(f"http://127.0.0.1:{port}/v1", timeout_s=5.0)
