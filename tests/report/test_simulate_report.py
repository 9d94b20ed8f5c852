"""report.simulate: the scenario and workload are data on screen, never markup or control."""

from __future__ import annotations

import io

from rich.console import Console

from infertriage.report.simulate import render_simulation
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.simulate import Stage, simulate

HOSTILE = "[/x][bold]\x1b[2J\x1b]0;pwn\x07<script>|`"


def test_a_staged_run_with_hostile_names() -> None:
    result = simulate(Scenario(), stages=[Stage(2, 5), Stage(4, 5)],
                      workload="synthetic:input=32,output=8", timeout_s=60.0)  # fmt: skip
    result = result.model_copy(update={"scenario": f"s{HOSTILE}", "workload": f"w{HOSTILE}"})
    out = io.StringIO()
    render_simulation(result, Console(file=out, width=200, force_terminal=False))
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "[/x][bold]" in text and "stage 2: 4 req/s for 5 s from 5 s" in text
    assert "time-out 60 s" in text


def test_an_offload_tier_says_what_it_hit() -> None:
    """Issue 33: with a CPU offload tier, the summary gives its hits and blocks moved."""
    scenario = Scenario.model_validate({"offload": {"cpu_blocks": 64}})
    result = simulate(scenario, rate=2, num_requests=6, workload="synthetic:input=64,output=4")
    out = io.StringIO()
    render_simulation(result, Console(file=out, width=300, force_terminal=False))
    assert "offload tier hits" in out.getvalue() and "blocks stored" in out.getvalue()
    plain = simulate(Scenario(), rate=2, num_requests=6, workload="synthetic:input=64,output=4")
    out = io.StringIO()
    render_simulation(plain, Console(file=out, width=300, force_terminal=False))
    assert "offload" not in out.getvalue()
