"""cli, level 6: `infertriage bench` — parse, call `api.bench.run_bench`, render.

Exit codes: 0 done, 2 a user error (one sentence on stderr), 4 a load level in
which no request succeeded (the summary printed, every record kept, one line on
stderr), 130 interrupted (Ctrl-C: the partial summary is printed and every
record kept).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from infertriage import api
from infertriage.cli import flags
from infertriage.cli.common import live_view, print_json
from infertriage.cli.options import arrival_spec, seconds
from infertriage.schemas import Interrupted, UserError, load_thresholds
from infertriage.schemas.errors import EXIT_NO_SUCCESS
from infertriage.workload import WorkloadSpec

if TYPE_CHECKING:
    from infertriage.api.bench import BenchResult


def _split(values: list[str], flag: str, kind: type[float] | type[int]) -> list[float]:
    """`--rate 1,2,4 --rate 8`: the numbers, in order (their range is the spec's)."""
    out: list[float] = []
    for value in values:
        for part in value.split(","):
            text = part.strip().lower()
            if not text:
                continue
            try:
                number = float("inf") if text == "inf" and kind is float else kind(text)
            except ValueError:
                raise UserError(f"{flag} {value!r}: {part.strip()!r} is not a number.") from None
            out.append(float(number))
    return out


def bench(
    url: str = flags.url(...),
    model: str | None = flags.served_model(),
    endpoint: str = flags.endpoint(),
    api_key: str | None = flags.api_key(),
    rate: list[str] = flags.rate([]),
    concurrency: list[str] = flags.concurrency([]),
    sweep: bool = typer.Option(False, "--sweep", help="Find max throughput and the knee."),
    find_max_rate: bool = typer.Option(
        False,
        "--find-max-rate",
        help="Search the largest Poisson rate whose SLOs hold.",
    ),
    max_rate_rule: str = typer.Option(
        "attainment",
        "--max-rate-rule",
        metavar="RULE",
        help="attainment, or mlperf-server (p99, early stop).",
    ),
    attainment: float = typer.Option(
        0.9, "--attainment", metavar="SHARE", help="Search: share of requests meeting every SLO."
    ),
    rate_tolerance: float = typer.Option(
        0.05,
        "--rate-tolerance",
        metavar="SHARE",
        help="Search: stop when the bracket is this narrow.",
    ),
    workload: WorkloadSpec = flags.workload(),
    arrival: str = typer.Option(
        "poisson",
        "--arrival",
        metavar="PROCESS",
        callback=arrival_spec,
        help="poisson, constant, gamma:B, ramp:R0.",
    ),
    duration: float | None = flags.duration(),
    num_requests: int | None = flags.num_requests(),
    workers: int = typer.Option(
        1, "--workers", metavar="N", help="Client processes (one event loop each)."
    ),
    locust_workers: int | None = flags.locust_workers(),
    locust_master_host: str | None = flags.locust_master_host(),
    max_concurrency: int | None = typer.Option(
        None,
        "--max-concurrency",
        metavar="N",
        help="Cap on in-flight requests (the wait is reported).",
    ),
    think_time: float = typer.Option(
        "0", "--think-time", metavar="DURATION", parser=seconds, help="Closed loop: pause."
    ),
    out: Path | None = flags.out(),
    force: bool = flags.force(),
    slo: str | None = flags.slo(),
    goodput: str | None = typer.Option(
        None, "--goodput", metavar="SLOS", help="Per-request SLOs: ttft=200ms,…"
    ),
    header: list[str] = typer.Option(
        [], "--header", metavar="NAME:VALUE", help="NAME:VALUE, repeatable."
    ),
    timeout: float = flags.timeout("600s"),
    stall_timeout: float | None = typer.Option(
        None, "--stall-timeout", metavar="DURATION", parser=seconds, help="No byte for this."
    ),
    drain_timeout: float | None = typer.Option(
        None, "--drain-timeout", metavar="DURATION", parser=seconds, help="Wait after issuing."
    ),
    seed: int = flags.seed(),
    tokenizer: Path | None = flags.tokenizer(),
    max_model_len: int | None = flags.server_max_model_len(),
    continuous_usage: bool = typer.Option(
        True,
        "--continuous-usage/--no-continuous-usage",
        help="Ask for usage in every chunk.",
    ),
    ignore_eos: bool = typer.Option(
        True,
        "--ignore-eos/--no-ignore-eos",
        help="Exact lengths: send ignore_eos, min_tokens.",
    ),
    tokenize_check: bool = typer.Option(
        True,
        "--tokenize-check/--no-tokenize-check",
        help="Count prompts with /tokenize.",
    ),
    uvloop: bool = typer.Option(True, "--uvloop/--no-uvloop", help="Use uvloop where installed."),
    stop_on_saturation: bool = typer.Option(
        True,
        "--stop-on-saturation/--no-stop-on-saturation",
        help="Stop a --rate level once its queue grows without bound.",
    ),
    standard: str | None = flags.standard(),
    mlperf_model: str | None = flags.mlperf_model(),
    export: list[str] = flags.export(),
    json_out: bool = flags.json_out(),
    progress: bool = flags.progress(),
) -> int:
    # the load generator, its specs and its report load when a load runs, not for --help
    from infertriage.api.specs import BenchSpec, ClientSpec, parse_endpoint  # noqa: PLC0415
    from infertriage.report.bench import bench_to_json, render_bench  # noqa: PLC0415
    from infertriage.report.mlperf import summary_text, with_verdicts  # noqa: PLC0415

    if find_max_rate and not (slo or goodput):
        raise UserError("--find-max-rate needs an SLO to hold: give --goodput or --slo.")
    thresholds = load_thresholds(slo)
    rates = _split(rate, "--rate", float)
    concurrencies = [round(c) for c in _split(concurrency, "--concurrency", int)]
    client = ClientSpec(
        model=model,
        endpoint=parse_endpoint(endpoint),
        api_key=api_key,
        headers=tuple(header),
        tokenizer=tokenizer,
        max_model_len=max_model_len,
    )
    spec = BenchSpec(
        url=url,
        client=client,
        rates=tuple(rates),
        concurrencies=tuple(concurrencies),
        sweep=sweep,
        find_max_rate=find_max_rate,
        max_rate_rule=max_rate_rule,
        attainment=attainment,
        rate_tolerance=rate_tolerance,
        workload=workload,
        arrival=arrival,
        duration_s=duration,
        num_requests=num_requests,
        workers=workers,
        max_concurrency=max_concurrency,
        locust_workers=locust_workers,
        locust_master_host=locust_master_host,
        think_time_s=think_time,
        out=out,
        force=force,
        thresholds=thresholds,
        goodput=goodput,
        timeout_s=timeout,
        stall_timeout_s=stall_timeout,
        drain_timeout_s=drain_timeout,
        seed=seed,
        continuous_usage=continuous_usage,
        ignore_eos=ignore_eos,
        check_tokens=tokenize_check,
        use_uvloop=uvloop,
        stop_on_saturation=stop_on_saturation,
        standard=standard,
        mlperf_model=mlperf_model,
        exports=export,  # parsed by the spec (`schemas.exports`)
    )
    with live_view(json_out=json_out, progress=progress) as view:
        result = api.run_bench(spec, observer=view)
    if json_out:
        print_json(with_verdicts(bench_to_json(result), result.standard))
    else:
        render_bench(result, Console())
        for verdict in result.standard:  # `--standard mlperf`: LoadGen's block per level
            print(f"\n{verdict.level}:\n{summary_text(verdict)}", end="")
    if result.interrupted:
        raise Interrupted(f"the records and a partial summary are kept in {result.run_dir}.")
    if line := no_success(result):
        print(f"infertriage: {line}", file=sys.stderr)
        return EXIT_NO_SUCCESS
    return 0


def no_success(result: BenchResult) -> str:
    """One sentence when a level sent requests and none succeeded; "" otherwise."""
    for level in result.levels:
        s = level.summary
        if s.num_requests and not s.num_ok:
            kinds = ", ".join(f"{kind} {n}" for kind, n in s.errors[:3])
            if s.rejections.num_rejected:
                kinds = ", ".join(filter(None, [kinds, f"rejected {s.rejections.num_rejected}"]))
            if s.num_refused:
                kinds = ", ".join(filter(None, [kinds, f"refused (429) {s.num_refused}"]))
            return (
                f"no request of level {level.name} succeeded ({s.num_requests} sent: {kinds}); "
                f"the records are in {result.run_dir}."
            )
    return ""
