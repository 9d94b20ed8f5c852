"""One typed spec per command (issue 18 item 1): the api functions take a spec, not twenty
keyword arguments; each spec survives JSON; run.json keeps the spec and `--from-run` reads
it back through the same model."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import infertriage.api
from infertriage.api import specs
from infertriage.api.bench import run_bench
from infertriage.api.diagnose import diagnose
from infertriage.api.runview import RunSummary, measured_view, run_spec, run_target
from infertriage.api.specs import (
    BenchSpec,
    ClientSpec,
    CompareABSpec,
    CompareRunsSpec,
    DiagnoseSpec,
    Endpoint,
    FleetSpec,
    LoadMode,
    LogsSpec,
    MonitorConfigSpec,
    PlanSpec,
    SimulateSpec,
    TwinSpec,
    ValidateSpec,
    parse_endpoint,
)
from infertriage.schemas import BenchRunInfo, RunDir, Thresholds, UserError, write_json
from infertriage.twin.traffic import Stage
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

_MAX_PARAMETERS = 4  # the spec, and at most an observer, a shared run or a clock
# api.preflight belongs to the engine adapters' rework (issue 18 item 3), which reshapes it
_NOT_YET: set[str] = set()


def _public_functions() -> Iterator[tuple[str, Any]]:
    for info in pkgutil.iter_modules(infertriage.api.__path__):
        module = importlib.import_module(f"infertriage.api.{info.name}")
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if inspect.isfunction(value):
                yield f"{module.__name__}.{name}", value


def test_no_public_api_function_takes_more_than_four_parameters() -> None:
    found = dict(_public_functions())
    assert "infertriage.api.bench.run_bench" in found and len(found) > 20
    wide = {
        name: len(inspect.signature(function).parameters)
        for name, function in found.items()
        if len(inspect.signature(function).parameters) > _MAX_PARAMETERS
    }
    assert set(wide) <= _NOT_YET, wide


def test_each_command_takes_its_spec_first() -> None:
    takes = {
        "infertriage.api.bench.run_bench": "BenchSpec",
        "infertriage.api.diagnose.diagnose": "DiagnoseSpec",
        "infertriage.api.validate.validate": "ValidateSpec",
        "infertriage.api.compare.compare_ab": "CompareABSpec",
        "infertriage.api.compare.compare_runs": "CompareRunsSpec",
        "infertriage.api.plan.plan": "PlanSpec",
        "infertriage.api.simulate.simulate": "SimulateSpec",
        "infertriage.api.twin.serve_twin": "TwinSpec",
        "infertriage.api.metrics.fleet_metrics": "FleetSpec",
        "infertriage.api.report.write_report": "ReportSpec",
        "infertriage.api.monitor.monitor_config": "MonitorConfigSpec",
        "infertriage.api.logs.triage_logs": "LogsSpec",
    }
    found = dict(_public_functions())
    for name, spec in takes.items():
        first = next(iter(inspect.signature(found[name]).parameters.values()))
        assert first.annotation == spec, name


_CLIENT = ClientSpec(
    model="m", endpoint=Endpoint.COMPLETIONS, tokenizer=Path("tok.json"), max_model_len=4096
)
SPECS: list[BaseModel] = [
    ClientSpec(),
    _CLIENT,
    BenchSpec(url="http://h:8000"),
    BenchSpec(
        url="http://h:8000/v1",
        client=_CLIENT,
        rates=(1.0, 2.5, float("inf")),
        sweep=False,
        workload="synthetic:input=8,output=4",
        arrival="gamma:2",
        duration_s=3.0,
        num_requests=10,
        workers=2,
        max_concurrency=4,
        think_time_s=0.5,
        out=Path("runs/x"),
        force=True,
        thresholds=Thresholds(ttft_p95_s=0.3),
        goodput="ttft=200ms",
        stall_timeout_s=5.0,
        drain_timeout_s=1.0,
        seed=7,
        ignore_eos=False,
        labels=(("phase", "soak"),),
    ),
    DiagnoseSpec(),
    DiagnoseSpec(
        url="http://h:8000",
        client=_CLIENT,
        deployment={"tensor_parallel": 2, "gpu": "H100-SXM"},
        traces=(Path("a.json"),),
        logs=(Path("server.log"),),
        profile_s=2.0,
        concurrency=8,
    ),
    ValidateSpec(rate=4.0, soak_s=60.0, client=_CLIENT, functional=False),
    CompareRunsSpec(base="prod", run=Path("runs/r"), store=Path("store")),
    CompareABSpec(urls=("http://a:1", "http://b:2"), client=_CLIENT, rate=2.0, blocks=2),
    PlanSpec(
        model="llama-3.1-8b", gpu="H100-SXM", max_model_len=8192, concurrency=4, what_if=("tp=1,2",)
    ),
    SimulateSpec(scenario="healthy", rate=4.0, num_requests=10, seed=3),
    SimulateSpec(
        scenario="kv-pressure",
        stages=(Stage(8.0, 600.0), Stage(20.0, 60.0)),
        workload="prefix:groups=4,prompts=8,prefix=1024,input=128,output=64",
        arrivals="gamma:0.5",
        timeout_s=30.0,
    ),
    TwinSpec(scenario="healthy", port=0, load_time_s=0.0, profile_dir=Path("p")),
    FleetSpec(prometheus_url="http://p:9090", selector='job="vllm"', window_s=60.0),
    MonitorConfigSpec(
        engine="tgi",
        out=Path("mon"),
        baseline="prod",
        thresholds=Thresholds(alert_ttft_p95_s=0.3),
        selector='job="tgi"',
        for_scale=0.01,
    ),
    LogsSpec(
        files=(Path("a.log"), Path("b.log.gz")),
        engine="vllm",
        since="14:00",
        until="2026-12-02T14:30",
        interval_s=30.0,
    ),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: type(s).__name__)
def test_every_spec_round_trips_through_json(spec: BaseModel) -> None:
    document = json.loads(json.dumps(spec.model_dump(mode="json")))
    assert type(spec).model_validate(document) == spec


def test_specs_are_frozen_and_refuse_unknown_settings() -> None:
    spec = BenchSpec(url="http://h:8000")
    with pytest.raises(ValidationError):
        spec.url = "http://other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        BenchSpec(url="http://h:8000", rate=4.0)  # type: ignore[call-arg]


def test_the_key_and_header_values_are_sent_never_stored() -> None:
    client = ClientSpec(api_key="sk-secret", headers=("X-Team: secret-team",))
    spec = BenchSpec(url="http://h:8000", client=client)
    text = json.dumps(spec.model_dump(mode="json"))
    assert "secret" not in text and "secret" not in repr(spec)
    assert spec.client.api_key == "sk-secret"  # still there to send


def test_the_endpoint_and_load_modes_are_enums() -> None:
    assert parse_endpoint("completions") is Endpoint.COMPLETIONS
    with pytest.raises(UserError, match="--endpoint must be chat or completions, not 'x'"):
        parse_endpoint("x")
    assert {m.value for m in LoadMode} == {"rate", "concurrency", "replay"}
    assert set(specs.__all__) >= {"BenchSpec", "ClientSpec", "DiagnoseSpec", "ValidateSpec"}


_FAST = Behavior(ttft_s=0.002, itl_s=0.001)


def test_run_json_keeps_the_bench_spec_and_from_run_reads_it_back(tmp_path: Path) -> None:
    with serve_in_thread(ServerConfig(behavior=_FAST)) as (url, _):
        asked = BenchSpec(
            url=url, client=ClientSpec(api_key="sk-secret"), concurrencies=(2,), num_requests=6,
            workload="synthetic:input=8,output=4", out=tmp_path / "run", check_tokens=False,
        )  # fmt: skip
        result = run_bench(asked)
    info = RunDir.open(result.run_dir).read_info()
    assert "sk-secret" not in (result.run_dir / "run.json").read_text()
    stored = run_spec(info)
    assert isinstance(stored, BenchSpec)
    # what was run: the URL normalised and the model the server served chosen
    assert isinstance(info, BenchRunInfo)
    assert stored.url == info.config["url"] and stored.url.endswith("/v1")
    assert stored.client.model == info.config["model"] and stored.client.model
    assert stored.concurrencies == (2,) and stored.num_requests == 6
    assert stored.client.api_key is None  # never stored
    assert run_target(info, "?") == stored.url
    view = measured_view(RunDir.open(result.run_dir))
    assert view.main_level == "concurrency=2" and len(view.records) == 6
    again = diagnose(DiagnoseSpec(from_run=result.run_dir))
    assert again.target == stored.url


def test_a_run_without_a_spec_is_read_by_its_config(tmp_path: Path) -> None:
    info = BenchRunInfo(wall_anchor_s=0.0, config={"url": "http://h:1/v1"})
    assert run_spec(info) is None and run_target(info, "?") == "http://h:1/v1"
    assert run_target(BenchRunInfo(wall_anchor_s=0.0), "fallback") == "fallback"


def test_the_summary_is_read_through_its_model(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    document = {"command": "diagnose", "wall_anchor_s": 0.0, "config": {"target": "t"}}
    phases = {"load_start_ts": 0.0, "load_end_ts": 2.0}
    summary = {"status": "complete", "main_level": "c=16", "phases": phases, "levels": []}
    write_json(run.run_json, {**document, "summary": summary})
    got = RunSummary.of(run)
    assert got.main_level == "c=16" and got.phases is not None
    assert got.phases.load_end_ts == 2.0 and got.client_bound is False
    write_json(run.run_json, {**document, "summary": {"phases": "soon", "main_level": "x"}})
    with pytest.raises(UserError, match=r"invalid run.json \(diagnose.summary.phases"):
        measured_view(run)
