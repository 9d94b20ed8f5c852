"""The load engines behind one seam: the table picks each from its config, and `bench`
calls the protocol alone (a fake engine in the table is the one `run_bench` runs)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen import load_engine
from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.load_engine import (
    LOAD_ENGINES,
    AsyncioEngine,
    LoadContext,
    LoadRun,
    LocustEngine,
    WorkersEngine,
    engine_kind,
    make_engine,
)
from infertriage.loadgen.runner import LoadPlan, WorkerReport
from infertriage.schemas import UserError
from infertriage_testing.testserver import ServerConfig, serve_in_thread

BENCH = Path(__file__).resolve().parents[2] / "src" / "infertriage" / "api" / "bench.py"


def _config(**fields: object) -> BenchSpec:
    return BenchSpec.model_validate({"url": "http://127.0.0.1:1/v1", **fields})


def _context(tmp_path: Path) -> LoadContext:
    client = ClientConfig(base_url="http://127.0.0.1:1/v1", model="m")
    return LoadContext(client, 0, lambda record: None, lambda: False, None, tmp_path)


@pytest.mark.parametrize(
    ("fields", "kind", "engine"),
    [
        ({}, "asyncio", AsyncioEngine),
        ({"workers": 1}, "asyncio", AsyncioEngine),
        ({"workers": 3}, "workers", WorkersEngine),
        ({"locust_workers": 2}, "locust", LocustEngine),
        ({"locust_workers": 2, "locust_master_host": "0.0.0.0:5557"}, "locust", LocustEngine),
    ],
)
def test_the_table_picks_each_engine_from_its_config(
    tmp_path: Path, fields: dict[str, object], kind: str, engine: type
) -> None:
    config = _config(**fields)
    assert engine_kind(config) == kind and LOAD_ENGINES[kind] is engine
    assert isinstance(make_engine(config, _context(tmp_path)), engine)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"workers": 2, "locust_workers": 2}, "--workers and --locust-workers"),
        ({"locust_master_host": "h:1"}, "--locust-master-host needs --locust-workers"),
    ],
)
def test_a_config_asking_for_two_engines_is_refused(fields: dict[str, object], error: str) -> None:
    with pytest.raises(UserError, match=error):
        engine_kind(_config(**fields))


def test_the_environment_names_the_engine(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    assert LocustEngine(_config(locust_workers=1), ctx).load_engine == "locust"
    assert not LocustEngine(_config(locust_workers=1), ctx).uses_uvloop()
    assert WorkersEngine(_config(workers=2), ctx).load_engine == "infertriage"
    assert not AsyncioEngine(_config(use_uvloop=False), ctx).uses_uvloop()


@dataclass
class _Fake:
    """Answers each level with no request sent, and remembers the plans and the context."""

    config: BenchSpec
    context: LoadContext
    plans: list[LoadPlan] = field(default_factory=list)
    load_engine: ClassVar[str] = "fake"
    made: ClassVar[list[_Fake]] = []

    def __post_init__(self) -> None:
        _Fake.made.append(self)

    def run_level(self, plan: LoadPlan) -> LoadRun:
        self.plans.append(plan)
        report = WorkerReport(0, 0, 0.0, 1.0, (), self.context.stop(), False, False)
        return LoadRun([report], report.interrupted, ("a record the fake lost",))

    def uses_uvloop(self) -> bool:
        return False


def test_run_bench_runs_the_engine_the_table_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Fake.made.clear()
    monkeypatch.setitem(load_engine.LOAD_ENGINES, "workers", _Fake)
    with serve_in_thread(ServerConfig()) as (base, _):
        result = run_bench(
            BenchSpec(url=base, concurrencies=[2, 4], num_requests=4, workers=2,
                      out=tmp_path / "run", check_tokens=False)
        )  # fmt: skip
    (fake,) = _Fake.made
    assert [p.concurrency for p in fake.plans] == [2, 4]
    assert fake.context.run_root == tmp_path / "run"
    assert [lv.name for lv in result.levels] == ["concurrency=2", "concurrency=4"]
    assert result.warnings.count("a record the fake lost") == 2
    assert '"load_engine":"fake"' in (tmp_path / "run" / "run.json").read_text().replace(" ", "")


def test_bench_does_not_branch_on_the_engine() -> None:
    """`api.bench` names no engine and tests no option that picks one: the table does."""
    tree = ast.parse(BENCH.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    engines = {"run_load", "run_parallel", "run_locust", "have_uvloop"}
    assert not engines & (names | attrs | imported)
    assert not {"AsyncioEngine", "WorkersEngine", "LocustEngine"} & (names | imported)
    options = {"workers", "locust_workers", "locust_master_host", "use_uvloop"}
    tests = [n.test for n in ast.walk(tree) if isinstance(n, ast.If | ast.IfExp | ast.While)]
    tests += [n for n in ast.walk(tree) if isinstance(n, ast.Compare | ast.BoolOp | ast.match_case)]
    tested = {n.attr for t in tests for n in ast.walk(t) if isinstance(n, ast.Attribute)}
    assert not options & tested
