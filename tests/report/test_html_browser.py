"""The HTML report in a real browser: Debian's chromium, headless, driven over DevTools.

Each page — a diagnose run of the twin (`diagnose --html`), a bench, a
validate and an A/B run against a loopback server, and a bench run of a
server whose every text is hostile, asked for a model named like an HTML
injection — renders its charts, logs no console error or warning, throws
nothing, opens no dialog and requests nothing but itself. The hostile names
are in the page's text, and no element of theirs exists. The driver's own
test shows it sees each of those failures on a page that has them. Skips
with the reason where chromium is not installed (`apt-get install
chromium`; .ci/run does).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas.text import show_controls
from infertriage_testing.browser import PageLoad, chromium_binary, open_page
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

from ..hostileserver import HOSTILE_MODEL, serve_hostile

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="chromium is not installed (Debian: apt-get install chromium); the browser tests skip",
)

SMALL = ["--workload", "synthetic:input=8,output=5"]
INJECTION = "<img src=x onerror=alert(1)><script>alert(2)</script>"
ACTIVE = "script, img, iframe, object, embed, link, form"


def _load(page: Path) -> PageLoad:
    # a generous limit: chromium starts in ~2 s, slower on a busy two-core machine
    return open_page(page, selectors=["svg", "section", ACTIVE], timeout_s=90.0)


def _clean(load: PageLoad) -> None:
    assert load.foreign_requests == [], load.foreign_requests
    assert load.console == [] and load.exceptions == [] and load.dialogs == [], load
    assert load.counts[ACTIVE] == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One run of each kind against a loopback server, each with its report.html."""
    root = tmp_path_factory.mktemp("runs")
    out = {name: root / name for name in ("bench", "validate", "ab")}
    config = ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(config) as (url, _):
        bench = ["bench", "--url", url, "--concurrency", "1,4", "--num-requests", "12", *SMALL]
        assert main([*bench, "--out", str(out["bench"]), "--json"]) == 0
        validate = ["validate", "--url", url, "--concurrency", "2", "--num-requests", "8", *SMALL]
        assert main([*validate, "--out", str(out["validate"]), "--json"]) in (0, 1)
        ab = ["compare", "--url", url, "--url", url, "--num-requests", "8", "--blocks", "2"]
        assert main([*ab, *SMALL, "--out", str(out["ab"]), "--json"]) == 0
    for run in out.values():
        assert main(["report", str(run), "--json"]) == 0
    yield out


@pytest.mark.e2e
@pytest.mark.slow
def test_a_diagnose_run_of_the_twin_renders_clean(tmp_path: Path) -> None:
    page = tmp_path / "diagnose.html"
    args = ["diagnose", "--scenario", "kv-pressure", "--duration", "3", "--json"]
    # The default mix: the page must show a memory finding with its next steps, and short
    # outputs fill kv-pressure's cache too rarely in a 3 s level for that to hold every run.
    assert main([*args, "--out", str(tmp_path / "run"), "--html", str(page)]) == 0
    load = _load(page)
    _clean(load)
    assert load.counts["svg"] >= 6  # two distributions, throughput, queue, KV, GPU, …
    for heading in ("Seven-layer bottleneck map", "SLOs", "TTFT and ITL distributions",
                    "Over the run", "KV cache", "GPU activity", "Trace summary"):  # fmt: skip
        assert heading in load.text, heading
    assert "memory" in load.text and "Next steps" in load.text


@pytest.mark.parametrize(
    ("kind", "heading"),
    [("bench", "Load levels"), ("validate", "Go-live checklist"), ("ab", "A/B comparison")],
)
def test_bench_validate_and_ab_pages_render_clean(
    runs: dict[str, Path], kind: str, heading: str
) -> None:
    load = _load(runs[kind] / "report.html")
    _clean(load)
    assert heading in load.text and "TTFT and ITL distributions" in load.text
    assert load.counts["svg"] >= 3


def test_a_hostile_model_name_is_text(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = ServerConfig(model=INJECTION, behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(config) as (url, _):
        args = ["bench", "--url", url, "--num-requests", "8", "--concurrency", "2"]
        assert main([*args, *SMALL, "--out", str(run), "--json"]) == 0
    assert main(["report", str(run), "--json"]) == 0
    load = _load(run / "report.html")
    _clean(load)  # no alert ran, no image was fetched, no element of theirs exists
    assert INJECTION in load.text  # the server's model name, as text


def test_a_hostile_servers_text_is_text(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with serve_hostile() as url:  # its model, errors and /version: markup, escapes, <script>
        args = ["bench", "--url", url, "--num-requests", "8", "--concurrency", "2"]
        assert main([*args, *SMALL, "--out", str(run), "--json"]) == 0
    assert main(["report", str(run), "--json"]) == 0
    load = _load(run / "report.html")
    _clean(load)
    assert show_controls(HOSTILE_MODEL) in load.text  # controls made visible, <script> as text


def test_the_driver_sees_requests_errors_and_dialogs(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
        '<script>console.error("boom"); alert("ran")</script></body></html>',
        encoding="utf-8",
    )
    load = _load(page)
    assert load.foreign_requests == ["http://127.0.0.1:9/x.png"]
    assert "error: boom" in load.console and load.dialogs == ["ran"]
    assert load.counts[ACTIVE] == 2
