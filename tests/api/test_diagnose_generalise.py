"""The generalisation benchmark, exercised on a fresh sample every run.

`benchmarks/diagnose_generalise.py` draws deployments over ten models and nine
GPUs, SLOs relative to each deployment, faults at graded severities, pairs and
healthy cases. Here the draws come from a fixed set of seeds, chosen once (printed and
in every assertion message), so a run of the suite is the same on every day of the
year: a fast test checks that the generator's draws are valid and cover every family,
severity, model and GPU for each seed; a slow one runs one moderate-or-severe faulty
case and one healthy case of the first seed, each a real `diagnose` against the
real-time twin. A fresh draw every day is the benchmark's job
(`benchmarks/diagnose_generalise.py` without `--seed`); `INFERTRIAGE_SEED=S` runs these
tests on seed S instead, to explore or to rerun a benchmark's failure.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from infertriage.schemas import UserError
from infertriage.twin.scenario import scenario_from_mapping

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "diagnose_generalise.py"
# Chosen once (2026-12-04) and never drawn again: every run of the suite, on any day and on
# every xdist worker, draws the same samples. INFERTRIAGE_SEED=S opts into another seed.
_FIXED_SEEDS = (20261201, 20261204, 20261207, 20261211, 20261219)
_SEEDS = (
    (int(os.environ["INFERTRIAGE_SEED"]),) if os.environ.get("INFERTRIAGE_SEED") else _FIXED_SEEDS
)


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("diagnose_generalise", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _load()


@pytest.mark.parametrize("seed", _SEEDS)
def test_the_plan_covers_every_family_severity_and_pair(seed: int) -> None:
    plan = gen.plan_cases(160, seed=seed)
    singles = {(f[0], s) for f, s in plan if len(f) == 1}
    assert singles == {(f, s) for f in gen.FAMILIES for s in gen.SEVERITIES}, seed
    assert sum(1 for f, s in plan if s == "pair" and len(f) == 2) == 32, seed
    assert sum(1 for f, s in plan if s == "healthy" and not f) == 32, seed


@pytest.mark.parametrize("seed", _SEEDS)
def test_draws_are_valid_and_cover_every_family_severity_model_and_gpu(seed: int) -> None:
    """Every model on some GPU and every GPU with some model make a healthy deployment the
    twin starts; every family at every severity injects into one the twin still starts.
    (The symptom grading, which simulates, is left to the slow test and the benchmark.)"""
    print(f"seed {seed}")
    rng = random.Random(seed)
    bases = []
    for model, gpu in [*((m, None) for m in gen.MODELS), *((None, g) for g in gen.GPUS)]:
        for _ in range(200):
            s = gen._base(rng, model, gpu)
            try:
                if not gen.healthy_problem(s):
                    break
            except UserError:  # does not fit: redrawn, as the benchmark does
                continue
        else:
            pytest.fail(f"seed {seed}: no healthy deployment of {model or gpu}")
        scenario_from_mapping(s)
        bases.append(s)
    assert {s["model"] for s in bases} == set(gen.MODELS), seed
    assert {s["gpu"] for s in bases} >= set(gen.GPUS), seed
    assert {s["interconnect"] for s in bases} == {"nvlink", "pcie"}, seed
    assert any(s["tensor_parallel"] > 1 for s in bases), seed  # some deployment is sharded
    for family in gen.FAMILIES:
        for severity in gen.SEVERITIES:
            for base in rng.sample(bases, len(bases)):
                made = gen._faulty(rng, base, (family,), severity)
                if made is not None:
                    break
            else:
                pytest.fail(f"seed {seed}: {family} {severity} fits no base")
            scenario_from_mapping(made[0])  # the twin starts with it
            assert made[0] != base, (seed, family, severity)


@functools.cache
def _picked(seed: int) -> list[object]:
    """One moderate-or-severe single fault of a random family, and one healthy case. A
    draw no base can reach (the generator says so) moves on to another family."""
    rng = random.Random(seed)
    faulty = None
    for family in rng.sample(gen.FAMILIES, 3):
        severity = rng.choice(("moderate", "severe"))
        model, gpu = rng.choice(gen.MODELS), rng.choice(gen.GPUS)
        try:
            faulty = gen._draw(rng, 0, (family,), severity, model, gpu, 6.0)
            break
        except RuntimeError as err:
            print(f"seed {seed}: {err}")
    assert faulty is not None, f"seed {seed}: three families drew no case"
    healthy = gen._draw(rng, 1, (), "healthy", rng.choice(gen.MODELS), rng.choice(gen.GPUS), 6.0)
    return [faulty, healthy]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1], ids=["faulty", "healthy"])
def test_a_fresh_configuration_gets_its_primary_layer(which: int, tmp_path: Path) -> None:
    seed = _SEEDS[0]
    case = _picked(seed)[which]
    print(f"seed {seed}: {case.families or 'healthy'} {case.severity} {case.knobs}")
    result = gen.run_case(case, str(tmp_path))
    context = (
        f"seed {seed} (rerun: benchmarks/diagnose_generalise.py --seed {seed}); "
        f"{case.families} {case.severity}: {case.knobs}; ratio {case.ratio}; slo {case.slo}; "
        f"{gen._brief(case.scenario)}; found {result.primary} ({result.finding}); "
        f"bottlenecks {result.bottlenecks}; measured {result.slo}; contended {result.contended!r}"
    )
    assert not result.error, context + result.error
    if result.verdict == "contended":
        pytest.skip(f"host contention, not scored: {context}")
    assert result.verdict == "ok", context


@pytest.mark.parametrize("seed", _SEEDS)
def test_families_restrict_the_plan_to_their_faults(seed: int) -> None:
    plan = gen.plan_cases(20, seed=seed, only=("prefill-budget",))
    assert plan == gen.plan_cases(20, seed=seed, only=("prefill-budget",)), seed
    singles = {(f[0], s) for f, s in plan if len(f) == 1}
    assert singles == {("prefill-budget", s) for s in gen.SEVERITIES}, seed
    assert all("prefill-budget" in f for f, s in plan if s == "pair"), seed
    assert gen.plan_cases(40, seed=seed) == gen.plan_cases(40, seed=seed, only=gen.FAMILIES)


@pytest.mark.parametrize("seed", _SEEDS)
def test_a_starved_budget_is_drawn_on_large_sharded_models(seed: int) -> None:
    """Issue 32's class: moderate and severe budgets on ≥ 30 B models at TP ≥ 2 only (seats
    free, KV cache nearly empty); a small or unsharded base is redrawn. Mild on any base."""
    rng = random.Random(seed)
    drawn = {True: 0, False: 0}
    for model in gen.MODELS:
        for tp in (1, 2, 8):
            base = gen._base(rng, model, "H200")
            base["tensor_parallel"], base["interconnect"] = tp, "nvlink"
            large = gen.is_large(model) and tp >= 2
            for severity in ("moderate", "severe"):
                made = gen._faulty(rng, base, ("prefill-budget",), severity)
                assert (made is not None) is large or made is None, (seed, model, tp)
                if made is not None:
                    drawn[large] += 1
                    assert 20 <= made[0]["engine"]["max_num_batched_tokens"] <= 128
            assert gen._prefill_budget(rng, dict(base, engine=dict(base["engine"])), "mild")
    assert drawn[True] > 0 and drawn[False] == 0, seed
    large = {m for m in gen.MODELS if gen.is_large(m)}
    assert large == {"qwen3-30b-a3b", "mixtral-8x7b", "llama-3.1-70b", "llama-3.1-405b"} | {
        "deepseek-v3"
    }
