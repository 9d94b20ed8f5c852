"""The goodput search and MLPerf pages in a real browser (Debian's chromium, headless).

A `bench --find-max-rate` run and a `bench --standard mlperf` run against a loopback
server whose model is named like an HTML injection: each page renders its new section,
logs no console error or warning, runs nothing, opens no dialog and requests nothing
but itself; the model's name is in the page's text (LoadGen's "SUT name") and no
element of it exists. Skips where chromium is not installed, as
tests/report/test_html_browser.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage_testing.browser import chromium_binary, open_page
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="chromium is not installed (Debian: apt-get install chromium); the browser tests skip",
)

INJECTION = "<img src=x onerror=alert(1)><script>alert(2)</script>"
ACTIVE = "script, img, iframe, object, embed, link, form"
SMALL = ["--workload", "synthetic:input=8,output=4", "--no-tokenize-check"]


def test_goodput_search_and_mlperf_pages_render_clean(tmp_path: Path) -> None:
    search, mlperf = tmp_path / "search", tmp_path / "mlperf"
    behavior = Behavior(ttft_s=0.02, itl_s=0.002, num_tokens=4)
    with serve_in_thread(ServerConfig(model=INJECTION, behavior=behavior)) as (url, _):
        args = ["bench", "--url", url, "--find-max-rate", "--goodput", "ttft=1s"]
        args += ["--max-concurrency", "4", "--num-requests", "30", "--rate-tolerance", "0.5"]
        assert main([*args, *SMALL, "--out", str(search), "--json"]) == 0
        args = ["bench", "--url", url, "--standard", "mlperf", "--mlperf-model", "llama3_1-8b"]
        assert main([*args, "--rate", "4", "--duration", "1", *SMALL, "--out", str(mlperf)]) == 0
    for run, heading in ((search, "Goodput search"), (mlperf, "MLPerf LoadGen summary")):
        assert main(["report", str(run), "--json"]) == 0
        load = open_page(run / "report.html", selectors=["section", ACTIVE], timeout_s=90.0)
        assert load.foreign_requests == [], load.foreign_requests
        assert load.console == [] and load.exceptions == [] and load.dialogs == [], load
        assert load.counts[ACTIVE] == 0
        assert heading in load.text and INJECTION in load.text
    assert "Result is : INVALID" in load.text and f"SUT name : {INJECTION}" in load.text
