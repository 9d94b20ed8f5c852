"""The HTML report without a browser: escaping, self-containment, the command and its errors.

A hand-built `RunReport` whose every string is hostile renders with none of
them as markup; real runs (bench, validate, `compare --url`) against a
loopback server give a page through `report RUN`, with the sections each
kind of run has; bad paths are one sentence and exit 2. The browser's view
of the same pages: tests/report/test_html_browser.py.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from infertriage.analyze.stats.latency import summarize
from infertriage.cli import main
from infertriage.report.html import CSP, Band, Chart, LevelView, RunReport, Series, render_report
from infertriage.schemas import (
    Check,
    CheckGroup,
    CheckStatus,
    Diagnosis,
    EvidenceItem,
    Finding,
    Layer,
    LayerResult,
    Primary,
    RequestRecord,
    Status,
)
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

EVIL = "<img src=x onerror=alert(1)><script>alert(2)</script>\"'&\x1b[2J"
SMALL = ["--workload", "synthetic:input=8,output=5"]


def _diagnosis() -> Diagnosis:
    finding = Finding(
        id="memory.kv_pressure", layer=Layer.MEMORY, status=Status.BOTTLENECK, severity=1.0,
        explains=0.5, score=0.5, title=f"KV full on {EVIL}",
        evidence=(EvidenceItem(signal="kv.usage_max", value=1.0, unit="fraction", threshold=0.95,
                               source=EVIL),),
        explanation=EVIL, next_steps=(f"raise --gpu-memory-utilization ({EVIL})",), caveat=EVIL,
    )  # fmt: skip
    layers = tuple(
        LayerResult(layer=layer, status=Status.BOTTLENECK, findings=(finding,))
        if layer is Layer.MEMORY
        else LayerResult(layer=layer, status=Status.UNKNOWN, missing=(EVIL,))
        for layer in Layer
    )
    return Diagnosis(layers=layers, primary=Primary(layer=Layer.MEMORY, finding=finding.id))


def _hostile_report(tmp_path: Path) -> RunReport:
    record = RequestRecord(id="r", scheduled_ts=0.0, sent_ts=0.0)
    summary = summarize([record])
    level = LevelView(EVIL, summary, (), np.asarray([0.1, 0.2]), np.asarray([0.01, 0.02]))
    return RunReport(
        command="bench", target=EVIL, run_dir=tmp_path / EVIL.replace("/", "_"),
        created_unix_s=0.0, status="complete", facts=(("model", EVIL),), notes=(EVIL,),
        diagnosis=_diagnosis(), levels=(level,), main_level=EVIL, span=(0.0, 2.0),
        bands=(Band(EVIL, 0.0, 1.0),),
        charts=(Chart(EVIL, "fraction", (Series(EVIL, ((0.0, 0.1), (1.0, 0.5))),)),),
        checks=(Check(CheckGroup.FUNCTIONAL, EVIL, CheckStatus.FAIL, EVIL),), hints=(EVIL,),
    )  # fmt: skip


class _Tags(HTMLParser):
    """Every start tag of a page, with its attributes, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def test_every_server_string_is_text_and_the_page_loads_nothing(tmp_path: Path) -> None:
    page = render_report(_hostile_report(tmp_path))
    html = page.html
    assert "<img" not in html and "<script" not in html and "onerror=alert" in html
    assert "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;" in html
    assert "\x1b" not in html and "\\x1b[2J" in html  # terminal control made visible
    assert f'content="{CSP.replace(chr(39), "&#x27;")}"' in html
    # nothing to fetch: no src or href but in-page anchors, no element that loads or runs
    tags = _Tags()
    tags.feed(html)
    assert len(tags.found) > 100
    assert not {name for name, _ in tags.found} & {"script", "img", "iframe", "object", "link"}
    fetching = [
        (name, key, value) for name, attrs in tags.found for key, value in attrs
        if key in {"src", "href", "srcset", "action", "data", "xlink:href"}
        and not (value or "").startswith("#")
    ]  # fmt: skip
    assert not fetching
    expected = ("map", "checks", "levels", "distributions", "timeline", "facts")
    assert page.sections == expected


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))) as (base, _):
        yield base


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["report", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], run: Path, *extra: str) -> dict[str, object]:
    code, out, err = _report(capsys, str(run), "--json", *extra)
    assert code == 0, err
    document: dict[str, object] = json.loads(out)
    return document


def test_a_bench_run_gets_levels_distributions_and_time_series(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "bench"
    args = ["bench", "--url", url, "--concurrency", "1,2", "--num-requests", "6", *SMALL]
    assert main([*args, "--out", str(run), "--json"]) == 0
    document = _json(capsys, run)
    assert document["html"] == str(run / "report.html") and document["command"] == "bench"
    assert document["sections"] == ["slo", "levels", "distributions", "timeline", "facts"]
    html = (run / "report.html").read_text(encoding="utf-8")
    assert document["bytes"] == len(html.encode())
    assert "concurrency=2" in html and "diagnose --from-run" in html  # where the map comes from
    # diagnosed, the same run's page holds the map; --html puts it elsewhere
    diagnosed = tmp_path / "diagnosed.html"
    assert main(["diagnose", "--from-run", str(run), "--json", "--html", str(diagnosed)]) == 0
    assert "Seven-layer bottleneck map" in diagnosed.read_text(encoding="utf-8")
    elsewhere = tmp_path / "elsewhere.html"
    document = _json(capsys, run, "--html", str(elsewhere))
    assert document["sections"] == [
        "map", "slo", "levels", "distributions", "timeline", "facts",
    ]  # fmt: skip
    assert "Seven-layer bottleneck map" in elsewhere.read_text(encoding="utf-8")


def test_validate_and_ab_runs_get_their_checklist_and_comparison(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    validate, ab = tmp_path / "validate", tmp_path / "ab"
    args = ["validate", "--url", url, "--concurrency", "2", "--num-requests", "6", *SMALL]
    assert main([*args, "--skip-functional", "--out", str(validate), "--json"]) in (0, 1)
    args = ["compare", "--url", url, "--url", url, "--num-requests", "8", "--blocks", "2"]
    assert main([*args, *SMALL, "--out", str(ab), "--json"]) == 0
    assert "checks" in _json(capsys, validate)["sections"]  # type: ignore[operator]
    assert "ab" in _json(capsys, ab)["sections"]  # type: ignore[operator]
    html = (ab / "report.html").read_text(encoding="utf-8")
    assert "A/B comparison" in html and "output_throughput" in html


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{tmp}"], "not a run directory"),
        (["{run}", "--html", "{tmp}/no/such/folder/r.html"], "does not exist"),
        (["{run}", "--html", "{tmp}"], "is a folder"),
    ],
)
def test_bad_paths_are_one_sentence(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(
        json.dumps({"command": "bench", "wall_anchor_s": 0.0}), encoding="utf-8"
    )
    filled = [a.format(tmp=tmp_path, run=run) for a in args]
    code, out, err = _report(capsys, *filled)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err, err


def test_diagnose_html_of_one_scrape_is_refused_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scrape = tmp_path / "metrics.txt"
    scrape.write_text("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n")
    code = main(["diagnose", "--metrics-file", str(scrape), "--html", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and "--html needs a run directory" in err
    assert not (tmp_path / "r.html").exists()


def test_html_over_a_fifo_or_a_link_keeps_what_is_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(
        json.dumps({"command": "bench", "wall_anchor_s": 0.0}), encoding="utf-8"
    )
    fifo, loop, page, link = (tmp_path / name for name in ("fifo", "loop", "page.html", "link"))
    os.mkfifo(fifo)  # as a device: before, the page was renamed over it (as root: /dev/null)
    loop.symlink_to(loop)
    for target, needle in ((fifo, "not a regular file"), (loop, "a link to itself")):
        code, out, err = _report(capsys, str(run), "--html", str(target))
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert needle in err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and loop.is_symlink()
    page.write_text("old", encoding="utf-8")
    link.symlink_to(page)
    assert _report(capsys, str(run), "--html", str(link))[0] == 0
    assert link.is_symlink() and "<html" in page.read_text(encoding="utf-8")  # written through
    # a link to a page not made yet (`latest.html -> www/new.html`) is written through too
    (tmp_path / "www").mkdir()
    latest = tmp_path / "latest.html"
    latest.symlink_to(Path("www") / "new.html")
    code, out, _ = _report(capsys, str(run), "--html", str(latest))
    assert code == 0 and latest.is_symlink()
    assert "<html" in (tmp_path / "www" / "new.html").read_text(encoding="utf-8")
