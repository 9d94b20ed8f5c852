"""report, level 4: the README.md written beside the monitoring files.

Takes a `MonitorConfig` (duck-typed: its engine, rules, alerts, left-outs,
limits and timing); gives Markdown: how to load each file (Prometheus
`rule_files`, `promtool check rules` and `test rules`, Alertmanager, the
Grafana import), the alerts with their thresholds and where those came
from, the recorded series an HPA can scale on, and what was left out and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.report.monitoring.model import Recorded
from infertriage.report.monitoring.promql import duration
from infertriage.report.monitoring.rulefiles import alert_annotations

if TYPE_CHECKING:
    from infertriage.report.monitoring import MonitorConfig

__all__ = ["guide_markdown"]


def md_cell(text: str) -> str:
    """Our own text in a table cell: its pipes escaped (no server text reaches this file)."""
    return text.replace("|", "\\|")


_LOAD = """\
## Load them

1. Prometheus: copy `recording_rules.yml` and `alert_rules.yml` beside `prometheus.yml` and list
   them under `rule_files:`; check with `promtool check rules recording_rules.yml alert_rules.yml`
   and `promtool test rules rules_test.yml` (its input series are in this engine's own names).
   The rules select series by `job` and `instance`: scrape each replica as its own target.
   On Kubernetes, relabel each target's namespace and pod name to `namespace` and `pod`
   (kube-prometheus and prometheus-operator do): the per-replica series keep them, and
   prometheus-adapter finds a pod's series through them.
2. Alertmanager: merge `alertmanager.yml`'s route and receiver into yours (set the SMTP relay
   and the address); `amtool check-config alertmanager.yml` checks it.
3. Grafana: Dashboards → New → Import → upload `grafana_dashboard.json`, and pick the
   Prometheus data source (the `datasource` variable).
"""


def _alerts_table(config: MonitorConfig) -> list[str]:
    lines = ["| alert | layer | threshold | for | runbook |", "|---|---|---|---|---|"]
    for alert in config.alerts:
        notes = alert_annotations(alert, "http://INSTANCE", "JOB")
        held = duration(alert.for_s) if alert.for_s > 0 else "-"
        cells = (alert.name, alert.layer.value, notes["threshold"], held)
        row = " | ".join(md_cell(c) for c in cells)
        lines.append(f"| {row} | `{notes['runbook']}` |")
    return lines


def guide_markdown(config: MonitorConfig) -> str:
    """The README.md text (see the module docstring)."""
    recorded = {r.record for r in config.recordings}
    hpa = [r for r in (Recorded.WAITING, Recorded.KV_USAGE, Recorded.RUNNING) if r in recorded]
    lines = [
        f"# Monitoring for {config.engine}, made by `infertriage monitor-config`",
        "",
        f"Thresholds: {config.limits.origin}. Rates and quantiles over "
        f"{duration(config.timing.rate_window_s)}; rules evaluated every "
        f"{duration(config.timing.evaluation_interval_s)}.",
        "",
        _LOAD,
        "## Alerts",
        "",
        *_alerts_table(config),
        "",
        "## Series for autoscaling",
        "",
        "Per replica (`job`, `instance`; `namespace`, `pod` on Kubernetes), for an HPA "
        "through prometheus-adapter:",
        "",
        *[f"- `{r.value}`" for r in hpa],
        "",
        "`infertriage plan --traffic CURVE --hpa hpa.yaml` writes the HPA and the "
        "prometheus-adapter rules that serve these series as Pods metrics "
        "(`--keda PROMETHEUS_URL`: a KEDA ScaledObject instead).",
        "",
    ]
    if config.left_out:
        lines += ["## Left out", "", "| what | why |", "|---|---|"]
        lines += [f"| {md_cell(lo.what)} | {md_cell(lo.reason)} |" for lo in config.left_out]
        lines.append("")
    return "\n".join(lines)
