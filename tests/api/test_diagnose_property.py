"""The property benchmark's generator, exercised: random twin configurations, diagnosed.

`benchmarks/diagnose_property.py` draws ≥ 200 random configurations with one
injected fault and 50 healthy ones, and writes the confusion matrix to
benchmarks/. Here its draws are checked for every family. The real `diagnose`
runs on random configurations are `tests/api/test_diagnose_generalise.py`'s,
over a wider generator (ten models, nine GPUs, graded severities) and a fresh
sample each day.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from infertriage.twin.scenario import scenario_from_mapping

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "diagnose_property.py"
_SEED = 20261202
_DURATION_S = 6.0


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("diagnose_property", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


prop = _load()


def test_draws_are_seeded_valid_and_one_fault_each() -> None:
    cases = prop.draw_cases(16, 4, seed=_SEED)
    assert cases == prop.draw_cases(16, 4, seed=_SEED)
    assert cases != prop.draw_cases(16, 4, seed=_SEED + 1)
    families = [c.family for c in cases]
    assert all(families.count(f) == 2 for f in prop.FAMILIES) and families.count("healthy") == 4
    for case in cases:
        scenario_from_mapping(case.scenario)  # the twin starts with it
        engine, faults, spec = (case.scenario[k] for k in ("engine", "faults", "speculative"))
        injected = {
            "kv-leak": faults["kv_leak_blocks_per_request"] > 0,
            "launch-bound": not engine["cuda_graphs"],
            "tp-over-pcie": case.scenario["interconnect"] == "pcie"
            and case.scenario["tensor_parallel"] > 1,
            "spec-low-acceptance": spec["num_draft_tokens"] > 0,
            "queue-bound": engine["max_num_seqs"] <= 8,
            "kv-pressure": engine["gpu_memory_utilization"] < 0.5,
            "bandwidth-bound": case.scenario["gpu"] == "L4",
            "frontend-bound": case.scenario["frontend"]["tokenize_us_per_token"] >= 50,
        }
        assert set(injected) == set(prop.FAMILIES)
        for family, present in injected.items():
            assert present == (case.family == family), (case.family, family, case.severity)
