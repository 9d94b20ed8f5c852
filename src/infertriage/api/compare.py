"""api, level 5: `baseline save|list|delete` and `compare` — regressions and A/B.

`compare BASE RUN` takes a `CompareRunsSpec` (`api.specs`): a saved
baseline's name (or a run directory) and a run directory; pairs their load
levels (the measured level of a diagnose or validate run, else the levels
both ran), compares each pair's per-request samples with `analyze.compare`,
diffs the environment and the server configuration, and warns when the
traffic was not like for like.

`compare --url A --url B` (a `CompareABSpec`) drives both servers with the
same seeded schedule, interleaved in blocks (A B B A A B …, so a drift in
time hits both arms alike): each block's requests go to A and then to B, or
to B and then to A. The records (labelled `arm` A or B) land in one run
directory; A is the base. Ctrl-C (`api.interrupt`) stops the block in flight
and compares the requests that finished, if both arms have some.

Both plan their sample (`analyze.compare.power`): `compare BASE RUN` from the
base's spread, saying whether the runs were big enough; `compare --url` from
the first (pilot) block, announced before the rest run. `--until-decided`
keeps adding blocks of the same size, judging at the planned sample and at
1/4, 1/2, 2 and 4 times it, each look with its share of alpha
(`analyze.compare.sequential`: Pocock-type alpha spending, a metric final at
the look that decides it), until every metric is decided or `--max-requests`
per arm (default 4× the planned sample) is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel

from infertriage.analyze.compare.comparison import (
    Comparison,
    ConfigChange,
    MetricComparison,
    compare_records,
    config_diff,
    traffic_shape,
)
from infertriage.analyze.compare.power import SamplePlan, plan_sample
from infertriage.analyze.compare.sequential import (
    Look,
    look_alpha,
    planning_alpha,
    schedule,
    until_decided,
)
from infertriage.api.bench import SharedRun, run_bench
from infertriage.api.collect_thread import CollectedInfo
from infertriage.api.interrupt import Interrupt, interruptible
from infertriage.api.runview import RunSummary, group_key
from infertriage.api.specs import BenchSpec, CompareABSpec, CompareRunsSpec
from infertriage.api.target import Target, collector_for
from infertriage.loadgen.results import RunObserver, within
from infertriage.report.compare import CompareResult, LevelComparison, compare_to_json
from infertriage.schemas import (
    BaselineStore,
    CompareConfig,
    CompareRunInfo,
    CompareSummary,
    Deployment,
    Interrupted,
    RequestRecord,
    RunClock,
    RunDir,
    RunStatus,
    SavedBaseline,
    UserError,
    write_json,
)
from infertriage.schemas.inputs import why_missing

__all__ = [
    "CompareABSpec",
    "CompareRunsSpec",
    "compare_ab",
    "compare_runs",
    "delete_baseline",
    "list_baselines",
    "save_baseline",
]

_ARMS = ("A", "B")
_ALPHA = 0.05  # the comparison's (`compare_records`' default)
_BOUND_FACTOR = 4  # --until-decided stops at this many times the planned sample by default
_PLAN_ROUNDS = 5  # plan → fraction of --max-requests → plan: it settles in a few


# --- baselines -----------------------------------------------------------------------------


def save_baseline(
    name: str, run: Path, *, store: Path | None = None, force: bool = False
) -> SavedBaseline:
    return BaselineStore(store).save(name, RunDir.open(run), force=force)


def list_baselines(*, store: Path | None = None) -> list[SavedBaseline]:
    return BaselineStore(store).list()


def delete_baseline(name: str, *, store: Path | None = None) -> None:
    BaselineStore(store).delete(name)


def _resolve(base: str, store: Path | None) -> RunDir:
    """A run directory when `base` is one, else the saved baseline of that name."""
    path = Path(base)
    if (path / "run.json").is_file():
        return RunDir.open(path)
    if path.exists():
        raise UserError(f"{base} is not a run directory (no run.json in it).")
    if "/" in base:  # a path, as no baseline name holds a '/'
        raise UserError(f"{base} is not a run directory (it {why_missing(path)}).")
    return BaselineStore(store).get(base)


# --- pairing load levels -------------------------------------------------------------------


def _groups(run: RunDir) -> dict[str, list[RequestRecord]]:
    if not run.requests.exists():
        raise UserError(f"{run.root} has no requests.jsonl: nothing to compare.")
    groups: dict[str, list[RequestRecord]] = {}
    for record in run.iter_records(run.requests, RequestRecord):
        groups.setdefault(group_key(record), []).append(record)
    return groups


def _pairs(
    base: RunDir,
    run: RunDir,
    base_groups: dict[str, list[RequestRecord]],
    run_groups: dict[str, list[RequestRecord]],
) -> tuple[list[tuple[str, str]], list[str]]:
    """(base level, run level) pairs to compare, and notes on how they were chosen."""
    base_main = RunSummary.of(base).main_level
    run_main = RunSummary.of(run).main_level
    if base_main in base_groups and run_main in run_groups:
        note = (
            [] if base_main == run_main else [f"measured levels differ: {base_main} vs {run_main}"]
        )
        return [(base_main, run_main)], note
    common = [key for key in base_groups if key in run_groups]
    if common:
        return [(key, key) for key in common], []
    if len(base_groups) == 1 and len(run_groups) == 1:
        b, r = next(iter(base_groups)), next(iter(run_groups))
        return [(b, r)], [f"the runs share no load level: comparing {b} with {r}"]
    raise UserError(
        f"{base.root} and {run.root} share no load level ({', '.join(base_groups)} vs "
        f"{', '.join(run_groups)}): rerun with the same --rate or --concurrency."
    )


def _compare_dirs(
    base: RunDir, run: RunDir, spec: CompareRunsSpec
) -> tuple[tuple[LevelComparison, ...], list[str]]:
    base_groups, run_groups = _groups(base), _groups(run)
    pairs, notes = _pairs(base, run, base_groups, run_groups)
    threshold, seed = spec.threshold, spec.seed
    levels = tuple(
        LevelComparison(
            b,
            r,
            compare_records(base_groups[b], run_groups[r], threshold=threshold, seed=seed),
            # the base's spread plans the sample: were both runs big enough?
            plan_sample(
                [base_groups[b]],
                threshold=threshold,
                power=spec.power,
                alpha=_ALPHA,
                source="base",
            )
            if _per_arm([base_groups[b]]) >= 2
            else None,
        )
        for b, r in pairs
    )
    return levels, notes


def _diff(base: BaseModel, run: BaseModel) -> tuple[ConfigChange, ...]:
    """What differs between two sections of run.json, as their writers set them."""
    return config_diff(
        base.model_dump(mode="json", exclude_defaults=True),
        run.model_dump(mode="json", exclude_defaults=True),
    )


def compare_runs(spec: CompareRunsSpec) -> CompareResult:
    """`compare BASE RUN`; see the module docstring."""
    base, run, threshold = spec.base, spec.run, spec.threshold
    if not 0 < threshold < 10:
        raise UserError("--threshold must be a relative change such as 10% or 0.1.")
    base_dir, run_dir = _resolve(base, spec.store), RunDir.open(run)
    levels, notes = _compare_dirs(base_dir, run_dir, spec)
    base_info, run_info = base_dir.read_info(), run_dir.read_info()
    if base_info.command != run_info.command:
        notes.append(f"the base is a {base_info.command} run and the run a {run_info.command} run")
    return CompareResult(
        base=base,
        run=str(run),
        levels=levels,
        environment=_diff(base_info.environment, run_info.environment),
        server_config=_diff(base_info.server_config, run_info.server_config),
        notes=tuple(notes),
    )


# --- A/B -----------------------------------------------------------------------------------


def _arm_config(url: str, run: RunDir, clock: RunClock, arm: str) -> CollectedInfo:
    """Each arm's server configuration and environment, from one short collection."""
    folder = RunDir.create(run.raw / f"arm-{arm}")
    target = Target(url, None, None, None, Deployment(), f"arm {arm}", profile=False)
    collector = collector_for(target, folder, clock, metrics_optional=True)
    collector.start()
    return collector.stop()


def _block_order(index: int) -> tuple[int, int]:
    """A B, B A, A B, … : each arm goes first in half of the blocks."""
    return (0, 1) if index % 2 == 0 else (1, 0)


def _arms(run: RunDir) -> list[list[RequestRecord]]:
    records = list(run.iter_records(run.requests, RequestRecord))
    return [[r for r in records if r.labels.get("arm") == a] for a in _ARMS]


def _per_arm(arms: Sequence[Sequence[RequestRecord]]) -> int:
    """The requests each arm has answered: the fewer of the two."""
    return min(sum(1 for r in arm if r.ok) for arm in arms)


def _plan(spec: CompareABSpec, pilot: Sequence[Sequence[RequestRecord]]) -> SamplePlan:
    """The sample plan from the pilot block, in whole blocks, at the alpha its look can count
    on: the whole of it for fixed blocks; under --until-decided the look at the planned
    sample's share (`sequential.planning_alpha`; a few rounds of plan → share → plan)."""
    block = spec.num_requests // spec.blocks if spec.num_requests else 1
    planned, alpha = 1, _ALPHA
    for _ in range(_PLAN_ROUNDS if spec.until_decided else 1):
        if spec.until_decided:
            bound = spec.max_requests or _BOUND_FACTOR * planned
            alpha = planning_alpha(planned, bound, _ALPHA)
        plan = plan_sample(
            pilot, threshold=spec.threshold, power=spec.power, alpha=alpha, block=block
        )
        planned = plan.requests_per_arm
    return plan


def compare_ab(
    spec: CompareABSpec,
    *,
    observer: RunObserver | None = None,
    announce: Callable[[str], None] | None = None,
) -> CompareResult:
    """`compare --url A --url B`; see the module docstring. `observer`: a live view, told of
    each block's load on each server; `announce`: told the plan after the pilot block and,
    under --until-decided, each look."""
    urls, rate, concurrency, blocks = spec.urls, spec.rate, spec.concurrency, spec.blocks
    if rate is not None and concurrency is not None:
        raise UserError("give --rate or --concurrency, not both.")
    if blocks < 1:
        raise UserError("--blocks must be at least 1.")
    if spec.num_requests is not None and spec.num_requests < blocks:
        raise UserError(f"--num-requests must be at least --blocks ({blocks}).")
    if spec.max_requests is not None and not spec.until_decided:
        raise UserError("--max-requests bounds --until-decided; give both or neither.")
    shared = SharedRun(RunDir.create(spec.out, prefix="compare", force=spec.force))
    run, clock = shared.run, shared.clock
    configs = [_arm_config(url, run, clock, arm) for url, arm in zip(urls, _ARMS, strict=True)]
    blocks_run = _Blocks(spec, shared, observer, announce or (lambda _line: None))
    interrupted = blocks_run.run()
    arms = _arms(run)
    status: RunStatus = "interrupted" if interrupted else "complete"
    config = CompareConfig(urls=list(urls), blocks=blocks, rate=rate, concurrency=concurrency)
    if interrupted and not all(any(r.ok for r in arm) for arm in arms):
        _write_ab_info(shared, spec, config, CompareSummary(status=status))
        raise Interrupted(
            f"the interrupt came before both servers had answered a request, so there is "
            f"nothing to compare; what was sent is kept in {run.root}."
        )
    comparison = blocks_run.comparison or compare_records(
        arms[0], arms[1], threshold=spec.threshold, seed=spec.seed
    )
    plan = blocks_run.plan
    notes = [f"{blocks_run.count} interleaved blocks; each block's requests went to both servers"]
    if plan is not None:
        notes.append(plan.describe())
        if not spec.until_decided:
            notes.append(plan.enough(*(sum(1 for r in arm if r.ok) for arm in arms)))
    notes += [look.describe() for look in blocks_run.looks]
    if spec.until_decided and (blocks_run.looks or blocks_run.stalled is not None):
        notes.append(blocks_run.outcome())
    result = CompareResult(
        base=f"A {urls[0]}",
        run=f"B {urls[1]}",
        levels=(LevelComparison("A", "B", comparison, plan),),
        environment=_diff(configs[0].environment, configs[1].environment),
        server_config=_diff(configs[0].server_config, configs[1].server_config),
        notes=tuple(notes),
        run_dir=run.root,
        interrupted=interrupted,
        looks=tuple(blocks_run.looks),
    )
    summary = CompareSummary(
        status=status,
        verdict=result.verdict,
        regressed=result.regressed,
        inconclusive=result.inconclusive,
    )
    _write_ab_info(shared, spec, config, summary)
    write_json(run.root / "compare.json", compare_to_json(result))
    return result


def _block_spec(spec: CompareABSpec, index: int, arm: int) -> BenchSpec:
    """One block's load on one arm: the same seeded schedule for both arms of a block."""
    blocks, duration_s, num_requests = spec.blocks, spec.duration_s, spec.num_requests
    return BenchSpec(
        url=spec.urls[arm],
        client=spec.client,
        workload=spec.workload,
        rates=(spec.rate,) if spec.rate else (),
        concurrencies=(spec.concurrency or 8,) if not spec.rate else (),
        duration_s=duration_s / blocks if duration_s and num_requests is None else None,
        num_requests=num_requests // blocks if num_requests else None,
        seed=spec.seed + index,
        labels=(("arm", _ARMS[arm]), ("block", str(index))),
    )


class _Blocks:
    """The interleaved blocks, into one run: `spec.blocks` of them, or under --until-decided
    as many as it takes (`analyze.compare.sequential`). After `run`: the plan (from the first
    block), the looks, and the sequential comparison (None for fixed blocks)."""

    def __init__(
        self,
        spec: CompareABSpec,
        shared: SharedRun,
        observer: RunObserver | None,
        announce: Callable[[str], None],
    ) -> None:
        self.spec, self.shared, self.observer, self.announce = spec, shared, observer, announce
        self.plan: SamplePlan | None = None
        self.looks: tuple[Look, ...] = ()
        self.comparison: Comparison | None = None
        self.count = 0
        self.bound = 0
        self.stalled: int | None = None  # the block (1-based) in which an arm answered nothing
        self._interrupt: Interrupt | None = None

    def run(self) -> bool:
        """Whether Ctrl-C cut the blocks short."""
        with interruptible() as interrupt:
            self._interrupt = interrupt
            if not self._block(0):
                return True
            self._pilot()
            if self.spec.until_decided and self.plan is not None:
                self._until_decided()
            else:
                for index in range(1, self.spec.blocks):
                    if not self._block(index):
                        return True
            return interrupt.requested

    def _block(self, index: int) -> bool:
        """Block `index` on both arms, in its order; False when Ctrl-C came first."""
        assert self._interrupt is not None
        total = "" if self.spec.until_decided else f"/{self.spec.blocks}"
        for arm in _block_order(index):
            if self._interrupt.requested:
                return False
            phase = f"block {index + 1}{total} {_ARMS[arm]}"
            bench = _block_spec(self.spec, index, arm)
            run_bench(bench, observer=within(self.observer, phase), shared=self.shared)
        self.count = index + 1
        return not self._interrupt.requested

    def _pilot(self) -> None:
        pilot = _arms(self.shared.run)
        if _per_arm(pilot) < 2:
            line = "no plan: the pilot block left fewer than 2 answered requests per arm"
            if self.spec.until_decided:  # nothing to size the looks by: the fixed blocks
                line += f"; --until-decided runs the {self.spec.blocks} fixed blocks instead"
            self.announce(line)
            return
        self.plan = _plan(self.spec, pilot)
        self.bound = self.spec.max_requests or _BOUND_FACTOR * self.plan.requests_per_arm
        bound = f"; at most {self.bound} per arm" if self.spec.until_decided else ""
        self.announce(self.plan.describe() + bound)

    def _sizes(self) -> Iterator[tuple[int, int]]:
        """The requests per arm at each look of `sequential.schedule` (the first block to
        reach each point), until the bound or Ctrl-C; a block that adds no answered request
        ends it (a dead server)."""
        assert self.plan is not None
        points = list(schedule(self.plan.requests_per_arm, self.bound))
        size, index = _per_arm(_arms(self.shared.run)), 1
        while True:
            if size >= points[0]:
                yield index, size
                points = [p for p in points if p > size]
                if not points:
                    return
            if not self._block(index):
                return
            grown = _per_arm(_arms(self.shared.run))
            if grown <= size:  # an arm answered nothing in this block: no look on it
                self.stalled = index + 1
                return
            size, index = grown, index + 1

    def _judge(self, alpha: float) -> Sequence[MetricComparison]:
        base, run = _arms(self.shared.run)
        comparison = compare_records(
            base, run, threshold=self.spec.threshold, alpha=alpha, seed=self.spec.seed
        )
        return comparison.metrics

    def _until_decided(self) -> None:
        result = until_decided(
            self._sizes(),
            self._judge,
            bound=self.bound,
            alpha=_ALPHA,
            on_look=lambda look: self.announce(look.describe()),
        )
        self.looks, metrics = result.looks, result.metrics
        if result.looks and self.stalled is not None:
            metrics = self._last_look(metrics)
        if result.looks:  # else Ctrl-C came before the first look: judged whole, as fixed blocks
            base, run = _arms(self.shared.run)
            self.comparison = Comparison(metrics=metrics, shape=traffic_shape(base, run))

    def _last_look(self, metrics: Sequence[MetricComparison]) -> tuple[MetricComparison, ...]:
        """An arm stopped answering: a last look judges every request, its failures included,
        at the alpha left (as the look at the bound would); a regression it finds stands over
        an earlier look's verdict (the union bound over the looks still holds)."""
        last = self.looks[-1]
        alpha = look_alpha(last.per_arm, self.bound, self.bound, _ALPHA)
        judged = {m.metric: m for m in self._judge(alpha)}
        final = tuple(
            judged[m.metric] if judged.get(m.metric, m).verdict == "regression" else m
            for m in metrics
        )
        undecided = tuple(m.metric for m in final if m.verdict == "inconclusive")
        size = _per_arm(_arms(self.shared.run))
        block = self.stalled or last.block
        self.looks = (*self.looks, Look(last.index + 1, block, size, alpha, undecided))
        self.announce(self.looks[-1].describe())
        return final

    def outcome(self) -> str:
        """The sequential run's end, in one sentence."""
        if self.stalled is not None:
            return (
                f"an arm answered no request in block {self.stalled}: sampling stopped at "
                f"{_per_arm(_arms(self.shared.run))} requests per arm, and every request sent, "
                f"failures included, was judged"
            )
        last = self.looks[-1]
        if not last.undecided:
            return (
                f"every metric decided by {last.per_arm} requests per arm ({len(self.looks)} looks)"
            )
        return (
            f"stopped at {last.per_arm} requests per arm (bound {self.bound}) with "
            f"{len(last.undecided)} metric(s) undecided: {', '.join(last.undecided)}"
        )


def _write_ab_info(
    shared: SharedRun, spec: CompareABSpec, config: CompareConfig, summary: CompareSummary
) -> None:
    shared.run.write_info(
        CompareRunInfo(
            wall_anchor_s=shared.clock.wall_anchor_s,
            config=config,
            summary=summary,
            spec=spec.model_dump(mode="json"),
        )
    )
