"""Regenerate the trace goldens: `python tests/analyze/trace_goldens.py`, then review the diff.

Each golden is every signal of `infertriage trace` on one real fixture (see
../shared/fixtures/SOURCES.md), keyed by signal name; test_trace_fixtures.py
compares by key with a tolerance. Figures cross-checked against HTA are
listed in benchmarks/README.md.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from infertriage.api.trace import analyze_trace

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens" / "trace_signals.json"
FIXTURES = (
    "traces/pytorch/alexnet_single_gpu_a100_inference.json.gz",
    "traces/pytorch/amd_mi250_rocm62_train.json.gz",
    "traces/pytorch/cuda_event_sync_a100.json.gz",
    "traces/pytorch/ddp_2rank_nccl_rank0_a100.json.gz",
    "traces/pytorch/sampled_128rank_job_rank-0.json.gz",
    "traces/pytorch/simple_add_overlaid_critical_path_output.json.gz",
    "traces/pytorch/trace_diff_test_2rank_rank1_v100_cudagraph.json.gz",
    "traces/pytorch/triton_kernel_a100.json.gz",
    "traces/nsys/perlmutter-cloverleaf-cuda.sqlite",
    # two ranks of one job, analysed together
    "traces/pytorch/sampled_128rank_job_rank-0.json.gz+traces/pytorch/sampled_128rank_job_rank-1.json.gz",
)


def signals_of(root: Path, key: str) -> dict[str, float]:
    report = analyze_trace([root / part for part in key.split("+")])
    return {s.name: s.value for s in report.signals}


def main() -> int:
    sys.path.insert(0, str(HERE.parents[1]))  # the project: `tests` imports as a package
    root = importlib.import_module("tests.conftest").fixtures_dir()
    if root is None:
        print("real fixtures absent: set INFERTRIAGE_FIXTURES", file=sys.stderr)
        return 1
    goldens = {key: signals_of(root, key) for key in FIXTURES}
    GOLDENS.write_text(json.dumps(goldens, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDENS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
