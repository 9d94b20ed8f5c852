"""vLLM EPLB's balancedness log line, read as expert-parallel evidence. The line is vLLM's
format string (vllm/distributed/eplb/eplb_state.py, 0.10+, logged on EP rank 0 with
`--eplb-config '{"log_balancedness": true}'`), the first as pasted in a public vLLM issue
(DeepSeek-R1 with DP 8, 09-17), the others with numbers filled in here."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.analyze.logs import timeline_signals
from infertriage.api.logs import LogTriage, triage_logs
from infertriage.api.specs import LogsSpec
from infertriage.engines import VLLM, EventKind

IDLE = (
    "(EngineCore_DP0 pid=948) INFO 09-17 17:43:06 [distributed/eplb/eplb_state.py:390] "
    "EPLB step: avg_tokens=0.00, max_tokens=0, balancedness=0.0000"
)


def _line(clock: str, avg: float, most: int) -> str:
    return (
        f"(EngineCore_DP0 pid=948) INFO 09-17 {clock} [distributed/eplb/eplb_state.py:390] "
        f"EPLB step: avg_tokens={avg:.2f}, max_tokens={most}, balancedness={avg / most:.4f}"
    )


def test_an_eplb_step_line_is_an_expert_balance_event_and_an_idle_step_is_none() -> None:
    assert VLLM.log is not None and VLLM.log.read_events is not None
    (event,) = VLLM.log.read_events(_line("17:43:07", 812.5, 2031))
    assert event.kind is EventKind.EXPERT_BALANCE
    assert event.values["balancedness"] == pytest.approx(0.4, abs=1e-4)
    assert event.values["max_tokens"] == 2031
    assert VLLM.log.read_events(IDLE) == ()


STATS = (
    "INFO 09-17 {} [loggers.py:123] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg "
    "generation throughput: 90.0 tokens/s, Running: 16 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 12.5%, Prefix cache hit rate: 0.0%"
)


def _triage(tmp_path: Path, lines: list[str]) -> LogTriage:
    path = tmp_path / "vllm.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return triage_logs(LogsSpec(files=(path,)))


def test_the_log_gives_the_balance_signals_and_the_finding(tmp_path: Path) -> None:
    lines = [
        STATS.format("17:43:05"),
        IDLE,
        _line("17:43:07", 800.0, 2000),
        _line("17:43:08", 800.0, 1600),
        STATS.format("17:43:15"),
    ]
    triage = _triage(tmp_path, lines)
    found = {s.name: s.value for s in timeline_signals(triage.timeline)}
    assert found["ep.balancedness_mean"] == pytest.approx(0.45)
    assert found["ep.balancedness_worst"] == pytest.approx(0.4)
    assert found["ep.hot_rank_ratio"] == pytest.approx(1 / 0.45)
    ids = [f.id for layer in triage.diagnosis.layers for f in layer.findings]
    assert "parallelism.expert_imbalance" in ids


def test_a_log_without_eplb_lines_says_nothing_of_experts(tmp_path: Path) -> None:
    triage = _triage(tmp_path, [STATS.format("17:43:05"), STATS.format("17:43:15")])
    assert not any(s.name.startswith("ep.") for s in timeline_signals(triage.timeline))
