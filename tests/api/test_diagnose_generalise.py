"""The generalisation benchmark, exercised on a fresh sample every run.

`benchmarks/diagnose_generalise.py` draws deployments over ten models and nine
GPUs, SLOs relative to each deployment, faults at graded severities, pairs and
healthy cases. Here the seed is the date (UTC, printed and in every assertion
message: rerun a failure with `--seed`, or the test with INFERTRIAGE_SEED), so each
day's runs of the suite meet configurations no one tuned on: one moderate-or-severe
faulty case and one healthy one, each a real `diagnose` run against the real-time
twin. A fast test checks that the generator's draws are valid and cover every
family, severity, model and GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from infertriage.schemas import UserError
from infertriage.twin.scenario import scenario_from_mapping

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "diagnose_generalise.py"
# The date's seed: every worker of a run draws the same sample, each day draws a new one;
# INFERTRIAGE_SEED reruns a printed one.
_SEED = int(os.environ.get("INFERTRIAGE_SEED") or datetime.now(UTC).strftime("%Y%m%d"))


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("diagnose_generalise", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _load()


def test_the_plan_covers_every_family_severity_and_pair() -> None:
    plan = gen.plan_cases(160, seed=_SEED)
    singles = {(f[0], s) for f, s in plan if len(f) == 1}
    assert singles == {(f, s) for f in gen.FAMILIES for s in gen.SEVERITIES}, _SEED
    assert sum(1 for f, s in plan if s == "pair" and len(f) == 2) == 32, _SEED
    assert sum(1 for f, s in plan if s == "healthy" and not f) == 32, _SEED


def test_draws_are_valid_and_cover_every_family_severity_model_and_gpu() -> None:
    """Every model on some GPU and every GPU with some model make a healthy deployment the
    twin starts; every family at every severity injects into one the twin still starts.
    (The symptom grading, which simulates, is left to the slow test and the benchmark.)"""
    print(f"seed {_SEED}")
    rng = random.Random(_SEED)
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
            pytest.fail(f"seed {_SEED}: no healthy deployment of {model or gpu}")
        scenario_from_mapping(s)
        bases.append(s)
    assert {s["model"] for s in bases} == set(gen.MODELS), _SEED
    assert {s["gpu"] for s in bases} >= set(gen.GPUS), _SEED
    assert {s["interconnect"] for s in bases} == {"nvlink", "pcie"}, _SEED
    assert {s["tensor_parallel"] for s in bases} > {1}, _SEED
    for family in gen.FAMILIES:
        for severity in gen.SEVERITIES:
            for base in rng.sample(bases, len(bases)):
                made = gen._faulty(rng, base, (family,), severity)
                if made is not None:
                    break
            else:
                pytest.fail(f"seed {_SEED}: {family} {severity} fits no base")
            scenario_from_mapping(made[0])  # the twin starts with it
            assert made[0] != base, (_SEED, family, severity)


@functools.cache
def _picked() -> list[object]:
    """One moderate-or-severe single fault of a random family, and one healthy case. A
    draw no base can reach (the generator says so) moves on to another family."""
    rng = random.Random(_SEED)
    faulty = None
    for family in rng.sample(gen.FAMILIES, 3):
        severity = rng.choice(("moderate", "severe"))
        model, gpu = rng.choice(gen.MODELS), rng.choice(gen.GPUS)
        try:
            faulty = gen._draw(rng, 0, (family,), severity, model, gpu, 6.0)
            break
        except RuntimeError as err:
            print(f"seed {_SEED}: {err}")
    assert faulty is not None, f"seed {_SEED}: three families drew no case"
    healthy = gen._draw(rng, 1, (), "healthy", rng.choice(gen.MODELS), rng.choice(gen.GPUS), 6.0)
    return [faulty, healthy]


@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1], ids=["faulty", "healthy"])
def test_a_fresh_configuration_gets_its_primary_layer(which: int, tmp_path: Path) -> None:
    case = _picked()[which]
    print(f"seed {_SEED}: {case.families or 'healthy'} {case.severity} {case.knobs}")
    result = gen.run_case(case, str(tmp_path))
    context = (
        f"seed {_SEED} (rerun: benchmarks/diagnose_generalise.py --seed {_SEED}); "
        f"{case.families} {case.severity}: {case.knobs}; ratio {case.ratio}; slo {case.slo}; "
        f"{gen._brief(case.scenario)}; found {result.primary} ({result.finding}); "
        f"bottlenecks {result.bottlenecks}; measured {result.slo}; contended {result.contended!r}"
    )
    assert not result.error, context + result.error
    if result.verdict == "contended":
        pytest.skip(f"host contention, not scored: {context}")
    assert result.verdict == "ok", context
