"""cli, level 6: `infertriage baseline save|list|delete` and `infertriage compare`.

`compare` exits 0 unless `--fail-on-regression` is given; with it, 1
(`EXIT_REGRESSION`) when a metric regressed, 3 (`EXIT_INCONCLUSIVE`) when none
did but at least one could not be judged (too few samples, a change that is
not significant, a regression not ruled out), 0 when every metric was judged
and none regressed; 2 for a user error, as every command.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.compare import (
    compare_ab,
    compare_runs,
    delete_baseline,
    list_baselines,
    save_baseline,
)
from infertriage.api.specs import ClientSpec, CompareABSpec, CompareRunsSpec, parse_endpoint
from infertriage.cli import flags
from infertriage.cli.commands import HELP
from infertriage.cli.common import live_view, print_json
from infertriage.cli.examples import epilog
from infertriage.report.compare import (
    CompareResult,
    compare_markdown,
    compare_to_json,
    render_compare,
)
from infertriage.schemas import Interrupted, UserError, default_store_root, parse_fraction
from infertriage.schemas.errors import EXIT_INCONCLUSIVE
from infertriage.schemas.text import show_controls
from infertriage.workload import WorkloadSpec

baseline_app = typer.Typer(help=HELP["baseline"], epilog=epilog("baseline"), no_args_is_help=True)
EXIT_REGRESSION = 1
_FAIL_HELP = (
    f"Exit {EXIT_REGRESSION} when any metric regressed; exit {EXIT_INCONCLUSIVE} when none did "
    "but one is INCONCLUSIVE (too few samples, or a change not shown significant, or a "
    "regression not ruled out); 0 only when every metric was judged."
)


@baseline_app.command(
    "save",
    help="Store RUN (a run directory) as the baseline NAME.",
    epilog=epilog("baseline save"),
)
def save(
    name: str = typer.Argument(..., help="Baseline name."),
    run: Path = typer.Argument(..., help="Run directory (bench, diagnose or validate)."),
    force: bool = typer.Option(False, "--force", help="Replace a baseline of that name."),
    store: Path | None = flags.store(),
) -> None:
    saved = save_baseline(name, run, store=store, force=force)
    typer.echo(
        show_controls(
            f"saved baseline {saved.name!r} ({saved.command} run from {saved.source}) "
            f"in {saved.path}"
        )
    )


@baseline_app.command("list", help="The saved baselines.", epilog=epilog("baseline list"))
def list_(
    store: Path | None = flags.store(),
    json_out: bool = flags.json_out(),
) -> None:
    saved = list_baselines(store=store)
    if json_out:
        print_json(
            [
                {
                    "name": b.name,
                    "command": b.command,
                    "source": b.source,
                    "saved_at": b.saved_at,
                    "path": str(b.path),
                }
                for b in saved
            ]
        )
        return
    if not saved:
        typer.echo(f"no baselines in {store or default_store_root()}")
    for b in saved:
        typer.echo(show_controls(f"{b.name}\t{b.command}\t{b.saved_at}\t{b.source}"))


@baseline_app.command("delete", help="Delete the baseline NAME.", epilog=epilog("baseline delete"))
def delete(
    name: str = typer.Argument(..., help="Baseline name."),
    store: Path | None = flags.store(),
) -> None:
    delete_baseline(name, store=store)
    typer.echo(f"deleted baseline {name!r}")


def _change(text: str) -> float:
    """`--threshold`'s parser: 10% or 0.1 (its range is the spec's)."""
    try:
        return parse_fraction(text)
    except ValueError:
        raise UserError(
            f"--threshold {text.strip()!r} is not a fraction such as 10% or 0.1."
        ) from None


def compare(
    base: str | None = typer.Argument(None, help="Saved baseline name or run directory."),
    run: Path | None = typer.Argument(None, help="The run directory to judge."),
    url: list[str] = flags.ab_urls(),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help=_FAIL_HELP),
    threshold: float = typer.Option(
        "10%", "--threshold", metavar="CHANGE", parser=_change, help="Smallest change that matters."
    ),
    store: Path | None = flags.store(),
    rate: float | None = flags.rate(),
    concurrency: int | None = flags.concurrency(),
    duration: float = flags.duration("60s"),
    num_requests: int | None = flags.num_requests(),
    blocks: int = typer.Option(4, "--blocks", metavar="N", help="A/B: interleaved blocks."),
    power: float = typer.Option(
        0.8,
        "--power",
        metavar="SHARE",
        help="The sample plan's power to detect a --threshold change.",
    ),
    until_decided: bool = typer.Option(
        False,
        "--until-decided",
        help=(
            "A/B: keep adding blocks (each --num-requests/--blocks or --duration/--blocks) "
            "until every metric is decided or --max-requests per arm, with alpha spending "
            "over the looks."
        ),
    ),
    max_requests: int | None = typer.Option(
        None,
        "--max-requests",
        metavar="N",
        help="A/B --until-decided: the most requests per arm (default 4× the planned sample).",
    ),
    workload: WorkloadSpec = flags.workload(),
    model: str | None = flags.served_model(),
    endpoint: str = flags.endpoint(),
    api_key: str | None = flags.api_key(),
    seed: int = flags.seed(),
    out: Path | None = flags.out(),
    force: bool = flags.force(),
    markdown: Path | None = flags.markdown(),
    json_out: bool = flags.json_out(),
    progress: bool = flags.progress(),
) -> int:
    if url:
        if len(url) != 2 or base is not None:
            raise UserError("A/B takes exactly two --url (A then B) and no BASE or RUN.")
        client = ClientSpec(
            model=model,
            endpoint=parse_endpoint(endpoint),
            api_key=api_key,
        )
        spec = CompareABSpec(
            urls=(url[0], url[1]),
            client=client,
            rate=rate,
            concurrency=concurrency,
            duration_s=duration,
            num_requests=num_requests,
            blocks=blocks,
            workload=workload.text,
            threshold=threshold,
            power=power,
            until_decided=until_decided,
            max_requests=max_requests,
            seed=seed,
            out=out,
            force=force,
        )
        with live_view(json_out=json_out, progress=progress) as view:
            result = compare_ab(spec, observer=view, announce=None if json_out else _announce)
    else:
        if base is None or run is None:
            raise UserError(
                "give BASE and RUN (a baseline or run directory, then a run) or --url A --url B."
            )
        if until_decided or max_requests is not None:
            raise UserError("--until-decided and --max-requests are for A/B (--url A --url B).")
        result = compare_runs(
            CompareRunsSpec(
                base=base, run=run, threshold=threshold, power=power, store=store, seed=seed
            )
        )
    if markdown is not None:
        markdown.write_text(compare_markdown(result))
    if json_out:
        print_json(compare_to_json(result))
    else:
        render_compare(result, Console())
    if result.interrupted:
        raise Interrupted(
            f"the comparison judges only the requests that finished before the interrupt; "
            f"the run is kept in {result.run_dir}."
        )
    return _exit_code(result, fail_on_regression=fail_on_regression)


def _announce(line: str) -> None:
    """The plan after the pilot block, and each look, as they come (on stderr)."""
    typer.echo(show_controls(line), err=True)


def _exit_code(result: CompareResult, *, fail_on_regression: bool) -> int:
    if not fail_on_regression:
        return 0
    if result.regressed:
        return EXIT_REGRESSION
    return EXIT_INCONCLUSIVE if result.inconclusive else 0
