"""report, level 4: a promtool unit-test file for the generated rules (`rules_test.yml`).

Takes the engine's `Exporter`, the `Alert`s made, `Timing` and the labels a
scraped series carries; gives the text of a `promtool test rules` file whose
input series are in the engine's own raw names: a KV cache at 99 % raises
`InferTriageKVCacheFull` once its `for:` has passed (and not before), a TTFT
histogram whose requests all take 4× the limit raises `InferTriageTTFTHigh`,
failed requests at 10 % raise `InferTriageErrorRate` — each case where the
engine exports what it needs — and every case asserts the recorded series
in SI units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from infertriage.report.monitoring.model import Alert, Recorded, Timing
from infertriage.report.monitoring.promql import Exporter, duration
from infertriage.report.monitoring.rulefiles import alert_annotations, alert_labels
from infertriage.schemas.recorded import REPLICA_LABELS

__all__ = ["rules_test_yaml"]

_STEPS = 120  # samples of every input series: past the longest `for:` plus the window
_KV_FULL = 0.99


def _labels(base: Mapping[str, str], source_where: Sequence[tuple[str, str]], **more: str) -> str:
    merged = {**base, **dict(source_where), **more}
    return "{" + ", ".join(f'{k}="{v}"' for k, v in merged.items()) + "}"


def _expected(alert: Alert, labels: Mapping[str, str], url: str) -> dict[str, object]:
    kept = {k: v for k, v in labels.items() if k in REPLICA_LABELS}
    if alert.name in {"InferTriageTTFTHigh", "InferTriageErrorRate"}:
        kept = {"job": labels["job"]}  # fleet-wide: by job
    return {
        "exp_labels": {**kept, **alert_labels(alert)},
        "exp_annotations": alert_annotations(alert, url, labels["job"]),
    }


def _kv_series(engine: Exporter, base: Mapping[str, str]) -> list[dict[str, str]]:
    source = engine.sources("kv.usage")[0]
    value = f"{_KV_FULL / source.scale:.12g}+0x{_STEPS}"
    return [{"series": source.raw + _labels(base, source.where), "values": value}]


def _ttft_series(engine: Exporter, base: Mapping[str, str], limit_s: float) -> list[dict[str, str]]:
    """Every request in the bucket from half the limit to 4× it: p95 is 3.8× the limit."""
    source = engine.sources("server.ttft")[0]
    limit = limit_s / source.scale  # the bucket bounds in the raw unit
    buckets = ((f"{limit / 2:.12g}", 0), (f"{limit * 4:.12g}", 10), ("+Inf", 10))
    return [
        {
            "series": f"{source.raw}_bucket" + _labels(base, source.where, le=le),
            "values": f"0+{per_step}x{_STEPS}",
        }
        for le, per_step in buckets
    ]


def _error_series(engine: Exporter, base: Mapping[str, str]) -> list[dict[str, str]]:
    """One request in ten fails."""
    failed, finished = engine.sources("requests.failed")[0], engine.sources("requests.finished")[0]
    return [
        {"series": failed.raw + _labels(base, failed.where), "values": f"0+1x{_STEPS}"},
        {"series": finished.raw + _labels(base, finished.where), "values": f"0+9x{_STEPS}"},
    ]


def _inputs(engine: Exporter, alert: Alert, base: Mapping[str, str]) -> list[dict[str, str]]:
    if alert.name == "InferTriageKVCacheFull":
        return _kv_series(engine, base)
    if alert.name == "InferTriageTTFTHigh":
        return _ttft_series(engine, base, alert.threshold)
    if alert.name == "InferTriageErrorRate":
        return _error_series(engine, base)
    return []


def rules_test_yaml(
    engine: Exporter, alerts: Sequence[Alert], timing: Timing, base: Mapping[str, str]
) -> str | None:
    """The test file's text; None when the engine feeds none of the three cases."""
    step_s = max(timing.evaluation_interval_s, timing.rate_window_s / 10)
    url = f"http://{base['instance']}"
    tests: list[dict[str, object]] = []
    for alert in alerts:
        series = _inputs(engine, alert, base)
        if not series:
            continue
        # pending from the second sample (a rate needs two), firing once `for:` has held
        fires_s = alert.for_s + 3 * step_s
        checks: list[dict[str, object]] = []
        if alert.for_s >= 2 * step_s:
            quiet = duration(alert.for_s / 2)
            checks.append({"eval_time": quiet, "alertname": alert.name, "exp_alerts": []})
        checks.append(
            {
                "eval_time": duration(fires_s),
                "alertname": alert.name,
                "exp_alerts": [_expected(alert, base, url)],
            }
        )
        case: dict[str, object] = {
            "interval": duration(step_s),
            "input_series": series,
            "alert_rule_test": checks,
        }
        if alert.name == "InferTriageKVCacheFull":
            kept = {k: v for k, v in base.items() if k in REPLICA_LABELS}
            case["promql_expr_test"] = [
                {
                    "expr": Recorded.KV_USAGE.value,
                    "eval_time": duration(fires_s),
                    "exp_samples": [
                        {"labels": Recorded.KV_USAGE.value + _labels(kept, ()), "value": _KV_FULL}
                    ],
                }
            ]
        tests.append(case)
    if not tests:
        return None
    document = {
        "rule_files": ["recording_rules.yml", "alert_rules.yml"],
        "evaluation_interval": duration(timing.evaluation_interval_s),
        "tests": tests,
    }
    return yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)
