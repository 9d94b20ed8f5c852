"""Property test of `diagnose`: random twin configurations, one injected fault each.

    .venv/bin/python benchmarks/diagnose_property.py [--num-faulty 200] [--num-healthy 50]
        [--duration 6] [--seed 0] [--jobs 2] [--out benchmarks/diagnose_property]

Each case is a random deployment (model, GPU, tensor parallelism, engine knobs,
front-end costs, seed) that is healthy by construction, plus, for the faulty ones,
exactly one fault from the packaged families at a random severity that is still a
real fault (the bounds are in `_FAULTS`' functions, each says why). Every case is
one real `diagnose` run against the real-time twin, served from a YAML scenario.
Writes OUT.json (every case: config, expected and found primary, findings) and
OUT.md (confusion matrix of expected layer × primary layer, accuracy, failures),
rewritten as cases finish, so an interrupted run still reports what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infertriage.api.diagnose import DiagnoseSpec, diagnose
from infertriage.schemas import Diagnosis, Layer, Status, UserError
from infertriage.twin.capacity import make_hardware
from infertriage.twin.costmodel import BatchShape, CostModel
from infertriage.twin.scenario import scenario_from_mapping

# ---- the configurations -------------------------------------------------------------

# (model, GPU, tensor-parallel sizes) that meet the interactive SLOs on the twin at
# diagnose's load (16 streams of the chat mix), so that the only bottleneck is the fault.
# Left out, measured by this script: llama-3.1-70b at TP 2–8 (TTFT p95 373–947 ms, and at
# TP 2 its long streams outlast the drain) and A100s (qwen2.5-7b TTFT p95 887 ms) miss the
# 200 ms TTFT SLO with no fault at all; qwen2.5-0.5b at ~3 ms ITL saturates the twin's one
# Python front end on a busy 2-core host (client TTFT p95 560 ms vs the engine's 30 ms).
# The small and the large models appear where a fault needs them.
_DEPLOYMENTS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("llama-3.1-8b", "H100-SXM", (1, 2)),
    ("llama-3.1-8b", "H200", (1, 2)),
    ("llama-3.1-8b", "B200", (1,)),
    ("qwen2.5-7b", "H100-SXM", (1, 2)),
    ("qwen2.5-7b", "H200", (1,)),
    ("qwen2.5-7b", "B200", (1,)),
)
_SMALL_GPUS = ("H100-SXM", "H200", "A100-80GB", "B200")
_CONCURRENCY = 16  # diagnose's measured level
# the chat mix's mean prompt + output (log-normal, medians 512 and 256), capped at 2,048
_MEAN_REQUEST_TOKENS = 1100


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    family: str  # a fault family, or "healthy"
    expected: str | None  # the layer the fault lives in; None: no bottleneck at all
    severity: str  # the fault's knobs in words
    scenario: dict[str, Any]


def uniform(rng: random.Random, low: float, high: float, digits: int = 3) -> float:
    return round(rng.uniform(low, high), digits)


def healthy_knobs(rng: random.Random, context: Callable[[], int]) -> dict[str, Any]:
    """The engine, front-end, fault and seed keys of a healthy deployment: every knob within
    what production servers run. `context` gives `max_model_len` in its turn among the draws
    (the generalisation benchmark draws it before, and shares this)."""
    return {
        "engine": {
            "max_num_seqs": rng.choice((64, 128, 256, 512)),
            "max_num_batched_tokens": rng.choice((4096, 8192, 16384)),
            "max_model_len": context(),
            "block_size": rng.choice((16, 32)),
            "gpu_memory_utilization": uniform(rng, 0.85, 0.95),
            "enable_prefix_caching": rng.random() < 0.8,
            "enable_chunked_prefill": True,
            "cuda_graphs": True,
            "attention_backend": "flash",
            "scheduler_overhead_us_per_seq": uniform(rng, 5, 30, 1),
        },
        "speculative": {"num_draft_tokens": 0},
        "frontend": {
            "tokenize_us_per_token": uniform(rng, 0.5, 2.0, 2),
            "detokenize_us_per_token": uniform(rng, 1.0, 3.0, 2),
            "serialize_us_per_chunk": uniform(rng, 10, 30, 1),
        },
        "faults": {"kv_leak_blocks_per_request": 0, "error_rate": 0.0},
        "seed": rng.randrange(1 << 30),
    }


def _base(rng: random.Random) -> dict[str, Any]:
    """A healthy deployment: every knob within what production servers run."""
    model, gpu, tps = rng.choice(_DEPLOYMENTS)
    return {
        "model": model,
        "dtype": "bf16",
        "gpu": gpu,
        "tensor_parallel": rng.choice(tps),
        "interconnect": "nvlink",
        **healthy_knobs(rng, lambda: rng.choice((8192, 16384))),
    }


def _num_blocks(scenario: dict[str, Any]) -> int:
    return make_hardware(scenario_from_mapping(scenario)).num_usable_blocks


def _kv_pressure(rng: random.Random, s: dict[str, Any]) -> str:
    """The KV cache holds 30–70 % of what 16 chat requests need (gpu_memory_utilization lowered).

    Prompts are capped at half of max_model_len 4,096 and vLLM needs one whole request's
    room to start, so the cache holds 4,096 tokens at least.
    """
    s["engine"]["max_model_len"] = 4096
    demand = _CONCURRENCY * _MEAN_REQUEST_TOKENS
    target = max(4096 + 2 * s["engine"]["block_size"], uniform(rng, 0.3, 0.7) * demand)
    low, high = 0.01, s["engine"]["gpu_memory_utilization"]
    for _ in range(40):  # bisection on the utilisation that leaves `target` tokens of KV
        mid = (low + high) / 2
        s["engine"]["gpu_memory_utilization"] = mid
        try:
            tokens = _num_blocks(s) * s["engine"]["block_size"]
        except UserError:
            tokens = 0
        low, high = (low, mid) if tokens > target else (mid, high)
    s["engine"]["gpu_memory_utilization"] = round(high, 4)
    tokens = _num_blocks(s) * s["engine"]["block_size"]
    return f"gpu_memory_utilization {high:.4f}: KV holds {tokens} tokens ({tokens / demand:.0%})"


def _kv_leak(rng: random.Random, s: dict[str, Any]) -> str:
    """Every finished request keeps half to all of a typical request's blocks for ever.

    The twin leaks at most the blocks a request holds. Smaller leaks are real too, but on
    a cache of millions of tokens they show only over thousands of requests: a soak
    (`validate --soak`), not a diagnose run of seconds.
    """
    share = uniform(rng, 0.5, 1.0, 2)
    leak = max(1, round(share * _MEAN_REQUEST_TOKENS / s["engine"]["block_size"]))
    s["faults"]["kv_leak_blocks_per_request"] = leak
    return f"{leak} blocks leaked a request ({share:.0%} of a typical request's)"


def _queue_bound(rng: random.Random, s: dict[str, Any]) -> str:
    """max_num_seqs 2–8: under half of the 16 streams get a seat, the rest queue for seconds."""
    s["engine"]["max_num_seqs"] = rng.randint(2, 8)
    return f"max_num_seqs {s['engine']['max_num_seqs']}"


def _launch_bound(rng: random.Random, s: dict[str, Any]) -> str:
    """A small model in eager mode: its kernels take less GPU time than their host launches."""
    s.update(model="qwen2.5-0.5b", gpu=rng.choice(_SMALL_GPUS), tensor_parallel=1)
    s["engine"]["cuda_graphs"] = False
    s["engine"]["launch_us_per_kernel"] = uniform(rng, 8, 20, 1)
    return f"cuda_graphs off, {s['engine']['launch_us_per_kernel']} µs a launch"


def _bandwidth_bound(rng: random.Random, s: dict[str, Any]) -> str:
    """A 7–9 B model in bf16 on an L4 (300 GB/s): the weights alone take ≥ 50 ms a step."""
    s.update(model=rng.choice(("llama-3.1-8b", "qwen2.5-7b")), gpu="L4", tensor_parallel=1)
    s["interconnect"] = "pcie"
    s["engine"]["max_num_seqs"] = rng.choice((64, 128, 256))
    s["engine"]["max_model_len"] = 8192
    s["engine"]["gpu_memory_utilization"] = uniform(rng, 0.9, 0.95)
    return f"{s['model']} on an L4"


def comm_share(s: dict[str, Any]) -> float:
    """All-reduce share of GPU time in a decode step of 16 sequences, by the twin's cost model."""
    scenario = scenario_from_mapping(s)
    model = CostModel(make_hardware(scenario), scenario)
    step = model.step_cost(
        BatchShape(
            num_decode_seqs=_CONCURRENCY,
            decode_context_sum=_CONCURRENCY * _MEAN_REQUEST_TOKENS // 2,
            num_decode_tokens=_CONCURRENCY,
        )
    )
    return step.comm_s / step.kernel_s if step.kernel_s > 0 else 0.0


def _tp_over_pcie(rng: random.Random, s: dict[str, Any]) -> str:
    """Tensor parallelism 4–8 over PCIe without NVLink bridges, spending ≥ 45 % of GPU time
    in all-reduce (the twin's cost model says which: a 7–8 B model at TP 8 on H100 PCIe; on
    L40S or at TP 4 it is 30–35 %, an inefficiency the SLOs absorb, not a bottleneck)."""
    while True:
        model = rng.choice(("llama-3.1-8b", "qwen2.5-7b", "llama-3.1-70b"))
        gpu, tp = rng.choice(("H100-PCIe", "L40S")), rng.choice((4, 8))
        s.update(model=model, gpu=gpu, tensor_parallel=tp, interconnect="pcie")
        try:
            share = comm_share(s)
        except UserError:
            continue
        if share >= 0.45:
            return f"{model} TP {tp} over PCIe on {gpu}: all-reduce {share:.0%} of GPU time"


def spec_rate(drafts: int, acceptance: float) -> float:
    """Accepted / drafted, each draft token accepted with `acceptance` given the ones before."""
    return sum(acceptance**i for i in range(1, drafts + 1)) / drafts


def _spec_low_acceptance(rng: random.Random, s: dict[str, Any]) -> str:
    """Drafts that cost more than they save: acceptance ≤ 25 % and k × cost ≥ the tokens gained."""
    while True:
        drafts = rng.randint(2, 8)
        acceptance = uniform(rng, 0.05, 0.45)
        cost = uniform(rng, 0.05, 0.25)
        gained = spec_rate(drafts, acceptance) * drafts
        if spec_rate(drafts, acceptance) <= 0.25 and drafts * cost >= gained:
            break
    s["speculative"] = {
        "num_draft_tokens": drafts,
        "acceptance_rate": acceptance,
        "draft_cost_fraction": cost,
    }
    rate = spec_rate(drafts, acceptance)
    return f"{drafts} drafts, acceptance {acceptance} ({rate:.0%} of drafts), cost {cost} a draft"


def _frontend_bound(rng: random.Random, s: dict[str, Any]) -> str:
    """A slow tokenizer and heavy serialisation in front of a fast small model: one busy thread."""
    s.update(model="qwen2.5-0.5b", gpu=rng.choice(_SMALL_GPUS), tensor_parallel=1)
    s["frontend"] = {
        "tokenize_us_per_token": uniform(rng, 50, 120, 1),
        "detokenize_us_per_token": uniform(rng, 10, 30, 1),
        "serialize_us_per_chunk": uniform(rng, 100, 250, 1),
    }
    f = s["frontend"]
    return (
        f"tokenize {f['tokenize_us_per_token']} µs/token, detokenize "
        f"{f['detokenize_us_per_token']} µs/token, serialize {f['serialize_us_per_chunk']} µs/chunk"
    )


_FAULTS: dict[str, tuple[Layer, Callable[[random.Random, dict[str, Any]], str]]] = {
    "kv-pressure": (Layer.MEMORY, _kv_pressure),
    "kv-leak": (Layer.MEMORY, _kv_leak),
    "queue-bound": (Layer.SCHEDULING, _queue_bound),
    "launch-bound": (Layer.KERNEL, _launch_bound),
    "bandwidth-bound": (Layer.HARDWARE, _bandwidth_bound),
    "tp-over-pcie": (Layer.PARALLELISM, _tp_over_pcie),
    "spec-low-acceptance": (Layer.SPECULATIVE, _spec_low_acceptance),
    "frontend-bound": (Layer.APPLICATION, _frontend_bound),
}
FAMILIES = tuple(_FAULTS)


def draw_case(rng: random.Random, index: int, family: str) -> Case:
    """One configuration that the twin accepts; redrawn until it starts (as vLLM would)."""
    while True:
        scenario = _base(rng)
        severity = ""
        expected = None
        if family != "healthy":
            layer, inject = _FAULTS[family]
            severity, expected = inject(rng, scenario), layer.value
        scenario["description"] = f"property case {index}: {family} {severity}".strip()
        try:
            scenario_from_mapping(scenario)
        except UserError:
            continue
        return Case(index, family, expected, severity, scenario)


def draw_cases(num_faulty: int, num_healthy: int, seed: int) -> list[Case]:
    """`num_faulty` cases spread evenly over the fault families, then `num_healthy` healthy."""
    rng = random.Random(seed)
    families = [FAMILIES[i % len(FAMILIES)] for i in range(num_faulty)]
    families += ["healthy"] * num_healthy
    rng.shuffle(families)
    return [draw_case(rng, i, family) for i, family in enumerate(families)]


# ---- running them -------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    case: Case
    primary: str | None = None
    finding: str | None = None
    bottlenecks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    slo: dict[str, float | None] = field(default_factory=dict)
    wall_s: float = 0.0
    error: str = ""

    @property
    def correct(self) -> bool:
        return not self.error and self.primary == self.case.expected


def run_case(case: Case, duration_s: float, workdir: str) -> Outcome:
    """One `diagnose` run of `case` against the real-time twin; its run directory stays."""
    folder = Path(workdir) / f"case-{case.index:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(case.scenario, sort_keys=False))
    started = time.monotonic()
    try:
        diagnosis = diagnose(
            DiagnoseSpec(scenario=str(path), duration_s=duration_s, out=folder / "run")
        ).diagnosis
    except Exception as err:  # a crash is a result of the property test, not of the harness
        error = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"
        return Outcome(case, wall_s=time.monotonic() - started, error=error)
    return _outcome_of(case, diagnosis, time.monotonic() - started)


def _outcome_of(case: Case, diagnosis: Diagnosis, wall_s: float) -> Outcome:
    outcome = Outcome(case, wall_s=wall_s)
    if diagnosis.primary is not None:
        outcome.primary, outcome.finding = diagnosis.primary.layer.value, diagnosis.primary.finding
    for layer in diagnosis.layers:
        for f in layer.findings:
            target = outcome.bottlenecks if f.status is Status.BOTTLENECK else outcome.warnings
            target.append(f.id)
    outcome.slo = {r.name: r.measured for r in diagnosis.slo}
    return outcome


def rediagnose(out: Path, runs: Path) -> tuple[list[Outcome], dict[str, Any]]:
    """The cases of OUT.json re-diagnosed from their kept run directories (`--from-run`).

    The rules as they are now, over the load, metrics and traces recorded then: what a
    rule change does to the same runs.
    """
    document = json.loads(out.with_suffix(".json").read_text())
    outcomes = []
    for row in document["cases"]:
        case = Case(**row["case"])
        run = runs / f"case-{case.index:03d}" / "run"
        if row["error"] or not (run / "diagnosis.json").is_file():  # as it was diagnosed then
            kept = {k: row[k] for k in ("primary", "finding", "bottlenecks", "warnings", "slo")}
            outcomes.append(Outcome(case, wall_s=row["wall_s"], error=row["error"], **kept))
            continue
        outcomes.append(
            _outcome_of(case, diagnose(DiagnoseSpec(from_run=run)).diagnosis, row["wall_s"])
        )
    return outcomes, document["meta"]


# ---- the report ---------------------------------------------------------------------

_COLUMNS = [layer.value for layer in Layer] + ["none"]


def _confusion(outcomes: Sequence[Outcome]) -> dict[str, Counter[str]]:
    rows: dict[str, Counter[str]] = {}
    for o in outcomes:
        found = "error" if o.error else (o.primary or "none")
        rows.setdefault(o.case.expected or "none", Counter())[found] += 1
    return rows


def _share(hits: int, total: int) -> str:
    return f"{hits}/{total} = {hits / total:.1%}" if total else "0/0"


def _correct(outcomes: Sequence[Outcome]) -> str:
    return _share(sum(o.correct for o in outcomes), len(outcomes))


def _brief(s: dict[str, Any]) -> str:
    e = s["engine"]
    return (
        f"{s['model']} {s['gpu']} TP{s['tensor_parallel']} {s['interconnect']}, "
        f"max_num_seqs {e['max_num_seqs']}, budget {e['max_num_batched_tokens']}, "
        f"len {e['max_model_len']}, block {e['block_size']}, "
        f"util {e['gpu_memory_utilization']}, "
        f"prefix {'on' if e['enable_prefix_caching'] else 'off'}, seed {s['seed']}"
    )


def _slo_text(slo: dict[str, float | None]) -> str:
    parts = []
    for name, value in slo.items():
        if value is not None:
            parts.append(
                f"{name} {value * 1e3:.0f} ms" if name != "error_rate" else f"err {value:.1%}"
            )
    return ", ".join(parts)


def render(outcomes: Sequence[Outcome], meta: dict[str, Any]) -> str:
    faulty = [o for o in outcomes if o.case.expected is not None]
    healthy = [o for o in outcomes if o.case.expected is None]
    lines = [
        "# diagnose: property test over random twin configurations",
        "",
        f"Command: `{meta['command']}`  ",
        f"Finished {len(outcomes)} of {meta['planned']} cases "
        f"({'complete' if len(outcomes) == meta['planned'] else 'partial'}); "
        f"load {meta['duration_s']:g} s of `diagnose` each, {meta['jobs']} at a time; "
        f"host load average at start {meta['load_start']}, now {meta['load_now']}; "
        f"wall {meta['wall_s']:.0f} s.",
        "",
        f"- faulty cases, primary layer correct: **{_correct(faulty)}**",
        f"- healthy cases with no bottleneck: **{_correct(healthy)}**",
        f"- crashed runs: {sum(1 for o in outcomes if o.error)}",
        "",
        "## Confusion matrix (rows: the injected fault's layer; columns: the primary found)",
        "",
        "| expected \\ primary | " + " | ".join(_COLUMNS) + " | error |",
        "|---" * (len(_COLUMNS) + 2) + "|",
    ]
    confusion = _confusion(outcomes)
    for row in _COLUMNS:
        if row in confusion:
            cells = [str(confusion[row][c]) for c in [*_COLUMNS, "error"]]
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += ["", "## By fault family", "", "| family | correct | median wall s |", "|---|---|---|"]
    for family in [*FAMILIES, "healthy"]:
        mine = [o for o in outcomes if o.case.family == family]
        if mine:
            walls = sorted(o.wall_s for o in mine)
            median = walls[len(walls) // 2]
            lines.append(
                f"| {family} | {_share(sum(o.correct for o in mine), len(mine))} | {median:.0f} |"
            )
    failures = [o for o in outcomes if not o.correct]
    lines += ["", f"## Failures ({len(failures)})", ""]
    if failures:
        lines += [
            "| # | family | fault | config | primary found | bottlenecks | SLOs |",
            "|---|---|---|---|---|---|---|",
        ]
        for o in sorted(failures, key=lambda o: o.case.index):
            found = o.error.splitlines()[0] if o.error else f"{o.primary}: {o.finding}"
            lines.append(
                f"| {o.case.index} | {o.case.family} | {o.case.severity} "
                f"| {_brief(o.case.scenario)} | {found} | {', '.join(o.bottlenecks)} "
                f"| {_slo_text(o.slo)} |"
            )
    lines += ["", "Every case's full scenario and findings are in the JSON beside this file."]
    return "\n".join(lines) + "\n"


def _load_average() -> str:
    try:
        return (
            subprocess.run(["uptime"], capture_output=True, text=True, check=True)
            .stdout.split("load average:")[-1]
            .strip()
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_report(outcomes: Sequence[Outcome], meta: dict[str, Any], out: Path) -> None:
    meta = {**meta, "load_now": _load_average(), "wall_s": time.monotonic() - meta["started"]}
    ordered = sorted(outcomes, key=lambda o: o.case.index)
    document = {
        "meta": {k: v for k, v in meta.items() if k != "started"},
        "cases": [asdict(o) | {"correct": o.correct} for o in ordered],
    }
    out.with_suffix(".json").write_text(json.dumps(document, indent=1) + "\n")
    out.with_suffix(".md").write_text(render(ordered, meta))


def run_all(
    cases: Iterable[Case],
    duration_s: float,
    jobs: int,
    on_done: Callable[[Outcome], None],
    keep: Path | None = None,
) -> None:
    with contextlib.ExitStack() as stack:
        if keep is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="diagnose-property-"))
        else:
            keep.mkdir(parents=True, exist_ok=True)
            workdir = str(keep)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            pending: set[Future[Outcome]] = {
                pool.submit(run_case, case, duration_s, workdir) for case in cases
            }
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    on_done(future.result())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--num-faulty", type=int, default=200)
    parser.add_argument("--num-healthy", type=int, default=50)
    parser.add_argument("--duration", type=float, default=6.0, help="diagnose --duration per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("diagnose_property"))
    parser.add_argument("--keep", type=Path, help="keep every case's run directory here")
    parser.add_argument(
        "--rediagnose",
        type=Path,
        metavar="DIR",
        help="no load: re-diagnose OUT.json's cases from the run directories kept in DIR",
    )
    args = parser.parse_args(argv)
    if args.rediagnose is not None:
        again, old = rediagnose(args.out, args.rediagnose)
        old["command"] += f"`, re-diagnosed by `--rediagnose {args.rediagnose}"
        write_report(again, {**old, "started": time.monotonic() - old["wall_s"]}, args.out)
        print(
            f"faulty correct {_correct([o for o in again if o.case.expected])}; "
            f"healthy clean {_correct([o for o in again if not o.case.expected])}"
        )
        return
    cases = draw_cases(args.num_faulty, args.num_healthy, args.seed)
    meta = {
        "command": "python benchmarks/diagnose_property.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "planned": len(cases),
        "duration_s": args.duration,
        "jobs": args.jobs,
        "seed": args.seed,
        "load_start": _load_average(),
        "started": time.monotonic(),
    }
    outcomes: list[Outcome] = []

    def on_done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        mark = "ok " if outcome.correct else "BAD"
        print(
            f"{mark} {len(outcomes):3d}/{len(cases)} #{outcome.case.index} {outcome.case.family}: "
            f"expected {outcome.case.expected}, got {outcome.primary} ({outcome.finding}) "
            f"{outcome.wall_s:.0f} s {outcome.error.splitlines()[0] if outcome.error else ''}",
            flush=True,
        )
        write_report(outcomes, meta, args.out)

    run_all(cases, args.duration, args.jobs, on_done, args.keep)
    faulty = [o for o in outcomes if o.case.expected is not None]
    healthy = [o for o in outcomes if o.case.expected is None]
    print(
        f"faulty correct {_share(sum(o.correct for o in faulty), len(faulty))}; "
        f"healthy clean {_share(sum(o.correct for o in healthy), len(healthy))}"
    )


if __name__ == "__main__":
    main()
