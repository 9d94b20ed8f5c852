"""report, level 4: monitoring config — Prometheus rules, Alertmanager, Grafana — for one engine.

Takes an engine adapter (its metric names: `infertriage.engines`),
dcgm-exporter's names (`collect.adapters.dcgm`), `AlertLimits` and `Timing`;
gives a `MonitorConfig`: the recording and alert rules made, those left out
and why, and the text of each file `monitor-config` writes
(`recording_rules.yml`, `alert_rules.yml`, `alertmanager.yml`,
`grafana_dashboard.json`, `rules_test.yml`, `README.md`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infertriage.collect.adapters.dcgm import DCGM
from infertriage.engines import EngineAdapter
from infertriage.report.monitoring.alerts import alert_rules
from infertriage.report.monitoring.dashboard import DASHBOARD_UID, dashboard_json
from infertriage.report.monitoring.guide import guide_markdown
from infertriage.report.monitoring.model import (
    Alert,
    AlertLimits,
    LeftOut,
    Recorded,
    Recording,
    Timing,
)
from infertriage.report.monitoring.promql import Exporter, duration
from infertriage.report.monitoring.rulefiles import alertmanager_yaml, rules_yaml
from infertriage.report.monitoring.rules import recording_rules
from infertriage.report.monitoring.unittests import rules_test_yaml

__all__ = [
    "DASHBOARD_UID",
    "Alert",
    "AlertLimits",
    "Exporter",
    "LeftOut",
    "MonitorConfig",
    "Recorded",
    "Recording",
    "Timing",
    "duration",
    "make_monitor_config",
]

_GPU_BY = "job, instance, gpu"


@dataclass(frozen=True)
class MonitorConfig:
    engine: str
    recordings: tuple[Recording, ...]
    alerts: tuple[Alert, ...]
    left_out: tuple[LeftOut, ...]
    limits: AlertLimits
    timing: Timing
    files: dict[str, str] = field(default_factory=dict)  # file name → its text


def make_monitor_config(
    adapter: EngineAdapter,
    limits: AlertLimits,
    timing: Timing,
    selector: str = "",
    gpu_selector: str = "",
) -> MonitorConfig:
    """Every file for `adapter`'s engine (see the module docstring)."""
    engine = Exporter(adapter.metrics, selector)
    gpu = Exporter((DCGM,), gpu_selector, by=_GPU_BY)
    recordings, unrecorded = recording_rules(engine, gpu, timing)
    alerts, no_alert = alert_rules(
        {lo.what: lo.reason for lo in unrecorded}, engine, gpu, limits, timing
    )
    recorded = {r.record.value for r in recordings}
    title = f"infertriage: {adapter.title} serving"
    board, no_panel = dashboard_json(title, recorded, (engine, gpu), limits, timing)
    recording_text, alert_text = rules_yaml(recordings, alerts, timing)
    files = {
        "recording_rules.yml": recording_text,
        "alert_rules.yml": alert_text,
        "alertmanager.yml": alertmanager_yaml(alerts),
        "grafana_dashboard.json": board,
    }
    test = rules_test_yaml(engine, alerts, timing, _test_labels(adapter, selector))
    if test is not None:
        files["rules_test.yml"] = test
    left = (*unrecorded, *no_alert, *no_panel)
    config = MonitorConfig(
        adapter.name, tuple(recordings), tuple(alerts), left, limits, timing, files
    )
    files["README.md"] = guide_markdown(config)
    return config


def _test_labels(adapter: EngineAdapter, selector: str) -> dict[str, str]:
    """The labels of the unit test's input series: a job and an instance, the namespace
    and pod Kubernetes service discovery adds (the recorded series must keep them), and
    every `name="value"` matcher of the selector, so that the rules select them."""
    labels = {
        "job": adapter.name,
        "instance": "replica-0:8000",
        "namespace": "serving",
        "pod": f"{adapter.name}-0",
    }
    for part in selector.split(","):
        name, sep, value = part.partition("=")
        if sep and not name.endswith(("!", "=~")) and not value.startswith("~"):
            labels[name.strip()] = value.strip().strip('"')
    return labels
