"""cli, level 6: `infertriage baseline save|list|delete` and `infertriage compare`.

`compare` exits 0 unless `--fail-on-regression` is given; with it, 1
(`EXIT_REGRESSION`) when a metric regressed, 3 (`EXIT_INCONCLUSIVE`) when none
did but at least one could not be judged (too few samples, a change that is
not significant, a regression not ruled out), 0 when every metric was judged
and none regressed; 2 for a user error, as every command.
"""

from __future__ import annotations

import math
import os
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
from infertriage.cli.commands import HELP
from infertriage.cli.common import live_view, print_json
from infertriage.cli.options import (
    http_url,
    new_file,
    non_negative,
    positive,
    seconds,
    workload_spec,
)
from infertriage.report.compare import (
    CompareResult,
    compare_markdown,
    compare_to_json,
    render_compare,
)
from infertriage.schemas import Interrupted, UserError, default_store_root, parse_fraction
from infertriage.schemas.errors import EXIT_INCONCLUSIVE
from infertriage.schemas.text import show_controls

baseline_app = typer.Typer(help=HELP["baseline"], no_args_is_help=True)
_STORE_HELP = "Baseline store folder (default: $INFERTRIAGE_HOME/baselines or the data folder)."
EXIT_REGRESSION = 1
_FAIL_HELP = (
    f"Exit {EXIT_REGRESSION} when any metric regressed; exit {EXIT_INCONCLUSIVE} when none did "
    "but one is INCONCLUSIVE (too few samples, or a change not shown significant, or a "
    "regression not ruled out); 0 only when every metric was judged."
)


@baseline_app.command("save", help="Store RUN (a run directory) as the baseline NAME.")
def save(
    name: str = typer.Argument(..., help="Baseline name."),
    run: Path = typer.Argument(..., help="Run directory (bench, diagnose or validate)."),
    force: bool = typer.Option(False, "--force", help="Replace a baseline of that name."),
    store: Path | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    saved = save_baseline(name, run, store=store, force=force)
    typer.echo(
        show_controls(
            f"saved baseline {saved.name!r} ({saved.command} run from {saved.source}) "
            f"in {saved.path}"
        )
    )


@baseline_app.command("list", help="The saved baselines.")
def list_(
    store: Path | None = typer.Option(None, "--store", help=_STORE_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
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


@baseline_app.command("delete", help="Delete the baseline NAME.")
def delete(
    name: str = typer.Argument(..., help="Baseline name."),
    store: Path | None = typer.Option(None, "--store", help=_STORE_HELP),
) -> None:
    delete_baseline(name, store=store)
    typer.echo(f"deleted baseline {name!r}")


def _positive_change(text: str) -> float:
    text = text.strip()
    try:
        value = parse_fraction(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(f"--threshold {text!r} is not a positive fraction such as 10% or 0.1.")
    return value


def compare(
    base: str | None = typer.Argument(None, help="Saved baseline name or run directory."),
    run: Path | None = typer.Argument(None, help="The run directory to judge."),
    url: list[str] = typer.Option(
        [], "--url", callback=http_url, help="A/B: give --url A --url B."
    ),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help=_FAIL_HELP),
    threshold: str = typer.Option("10%", "--threshold", help="Smallest change that matters."),
    store: Path | None = typer.Option(None, "--store", help=_STORE_HELP),
    rate: float | None = typer.Option(None, "--rate", callback=positive, help="A/B: requests/s."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", callback=positive, help="A/B: closed loop."
    ),
    duration: float = typer.Option(
        "60s",
        "--duration",
        parser=seconds,
        callback=positive,
        help="A/B: load per server, in all: 60, 90s, 2m.",
    ),
    num_requests: int | None = typer.Option(
        None, "--num-requests", callback=positive, help="A/B: per server."
    ),
    blocks: int = typer.Option(4, "--blocks", callback=positive, help="A/B: interleaved blocks."),
    workload: str = typer.Option(
        "chat-mix", "--workload", callback=workload_spec, help="A/B: workload spec or file."
    ),
    model: str | None = typer.Option(None, "--model", help="A/B: served model name."),
    endpoint: str = typer.Option("chat", "--endpoint", help="A/B: chat or completions."),
    api_key: str | None = typer.Option(None, "--api-key", help="Or OPENAI_API_KEY."),
    seed: int = typer.Option(
        0, "--seed", callback=non_negative, help="Workload and bootstrap seed."
    ),
    out: Path | None = typer.Option(None, "--out", help="A/B: run directory."),
    force: bool = typer.Option(False, "--force", help="A/B: replace the run already in --out."),
    markdown: Path | None = typer.Option(
        None, "--markdown", callback=new_file, help="Also write Markdown here."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Live view on stderr (in a terminal only)."
    ),
) -> int:
    limit = _positive_change(threshold)
    if url:
        if len(url) != 2 or base is not None:
            raise UserError("A/B takes exactly two --url (A then B) and no BASE or RUN.")
        client = ClientSpec(
            model=model,
            endpoint=parse_endpoint(endpoint),
            api_key=api_key or os.environ.get("OPENAI_API_KEY"),
        )
        spec = CompareABSpec(
            urls=(url[0], url[1]),
            client=client,
            rate=rate,
            concurrency=concurrency,
            duration_s=duration,
            num_requests=num_requests,
            blocks=blocks,
            workload=workload,
            threshold=limit,
            seed=seed,
            out=out,
            force=force,
        )
        with live_view(json_out=json_out, progress=progress) as view:
            result = compare_ab(spec, observer=view)
    else:
        if base is None or run is None:
            raise UserError(
                "give BASE and RUN (a baseline or run directory, then a run) or --url A --url B."
            )
        result = compare_runs(
            CompareRunsSpec(base=base, run=run, threshold=limit, store=store, seed=seed)
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


def _exit_code(result: CompareResult, *, fail_on_regression: bool) -> int:
    if not fail_on_regression:
        return 0
    if result.regressed:
        return EXIT_REGRESSION
    return EXIT_INCONCLUSIVE if result.inconclusive else 0
