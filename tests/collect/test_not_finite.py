"""A metric the server exports as NaN or ±Inf is reported as such, never as absent.

The view shows the value as the server said it (`NaN`, `+Inf`, `-Inf`) with a
note; the samples written to metrics.jsonl and every figure computed from them
(windows, derived ratios) leave it out.
"""

from __future__ import annotations

import io
import math

from rich.console import Console

from infertriage.collect import Availability, Scrape, adapt_scrape, build_view, parse_metrics_text
from infertriage.collect.scraper import samples_of
from infertriage.report.metrics import metrics_to_json, render_metrics

SCRAPE = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} NaN
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} +Inf
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} -Inf
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{model_name="m"} 3
"""


def _scrapes(*texts: str) -> list[Scrape]:
    out = []
    for t, text in enumerate(texts):
        exposition = parse_metrics_text(text, "scrape.txt")
        out.append(Scrape(float(t), "engine", "scrape.txt", adapt_scrape(exposition)))
    return out


def test_nan_and_inf_are_present_with_their_value_and_a_note() -> None:
    view = build_view(_scrapes(SCRAPE), source="scrape.txt")
    for name, shown in (("kv.usage", "NaN"), ("queue.running", "+Inf"), ("queue.waiting", "-Inf")):
        entry = view.entry(name)
        assert entry is not None and entry.status is Availability.PRESENT, name
        assert entry.value is not None and not math.isfinite(entry.value)
        assert f"the server exports {shown} here" in entry.note
    preemptions = view.entry("preemptions")
    assert (
        preemptions is not None and preemptions.value == 3.0 and "exports" not in preemptions.note
    )


def test_the_screen_says_nan_and_inf_and_json_says_null_with_the_note() -> None:
    view = build_view(_scrapes(SCRAPE), source="scrape.txt")
    out = io.StringIO()
    render_metrics(view, Console(file=out, width=160))
    text = out.getvalue()
    assert "NaN" in text and "+Inf" in text and "-Inf" in text
    assert "kv.usage" not in text.split("Absent from")[-1]  # not listed as absent
    document = {m["name"]: m for m in metrics_to_json(view)["metrics"]}
    assert document["kv.usage"]["status"] == "present" and document["kv.usage"]["value"] is None
    assert "NaN" in document["kv.usage"]["note"]


def test_samples_and_windows_leave_non_finite_values_out() -> None:
    scrapes = _scrapes(SCRAPE, SCRAPE.replace("NaN", "0.25"))
    samples = [s for scrape in scrapes for s in samples_of(scrape.t, scrape.adapted)]
    assert all(math.isfinite(s.value) for s in samples)
    assert [s.value for s in samples if s.name == "kv.usage"] == [0.25]
    view = build_view(scrapes, source="scrape.txt")
    kv = view.entry("kv.usage")
    assert kv is not None and kv.value == 0.25  # the last scrape's, a number
    assert kv.gauge is not None and kv.gauge.mean == 0.25 and kv.gauge.num_points == 1
