"""report, level 4: Prometheus rule files and an Alertmanager route, as YAML text.

Takes `Recording`s, `Alert`s and the `Timing`; gives `recording_rules.yml`
(headed by a comment on how its per-replica series are grouped: `job`,
`instance`, and `namespace`, `pod` for prometheus-adapter on Kubernetes)
and `alert_rules.yml` (rule groups as `promtool check rules` reads them;
each alert carries `layer` and `severity` labels and `summary`, `threshold`
and `runbook` annotations — the runbook names the layer and the command to
run next) and `alertmanager.yml` (a mail receiver, critical alerts repeated
sooner, KV-full inhibiting its preemption echo).
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from infertriage.report.monitoring.model import Alert, Recording, Timing
from infertriage.report.monitoring.promql import duration

__all__ = [
    "RECORDING_HEADER",
    "alert_annotations",
    "alert_labels",
    "alertmanager_yaml",
    "rules_yaml",
    "runbook",
]

_GROUP = "infertriage"


def _dump(document: object) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)


def _threshold_text(alert: Alert) -> str:
    value = alert.threshold
    if alert.unit == "s":
        return f"{alert.op} {value * 1000:.4g} ms"
    if alert.unit == "fraction":
        return f"{alert.op} {value * 100:.4g} %"
    if alert.unit == "bytes/s":
        return f"{alert.op} {value * 60 / 2**20:.4g} MiB/min"
    return f"{alert.op} {value:.4g} {alert.unit}".rstrip()


def runbook(alert: Alert, url: str, job: str) -> str:
    """The runbook annotation: the layer, and the command to run next for this replica."""
    text = f"layer: {alert.layer.value}. Next: {alert.next_step}"
    return text.replace("$URL", url).replace("$JOB", job)


def alert_labels(alert: Alert) -> dict[str, str]:
    return {"severity": alert.severity, "layer": alert.layer.value}


def alert_annotations(
    alert: Alert, url: str = "http://{{ $labels.instance }}", job: str = "{{ $labels.job }}"
) -> dict[str, str]:
    """Summary, threshold and runbook; `url` and `job` as Prometheus fills them in."""
    return {
        "summary": alert.summary,
        "threshold": _threshold_text(alert),
        "runbook": runbook(alert, url, job),
    }


def _alert_rule(alert: Alert) -> dict[str, object]:
    rule: dict[str, object] = {"alert": alert.name, "expr": alert.expr}
    if alert.for_s > 0:
        rule["for"] = duration(alert.for_s)
    rule["labels"] = alert_labels(alert)
    rule["annotations"] = alert_annotations(alert)
    return rule


# Why the per-replica series are grouped as they are: a comment at the file's head.
RECORDING_HEADER = """\
# Recording rules made by `infertriage monitor-config`.
#
# Per-replica series (`...:per_replica`) are grouped by (job, instance, namespace, pod):
# - Outside Kubernetes a replica is a scrape target, named by `job` and `instance`; the
#   targets carry no `namespace` or `pod`, and a `by` over an absent label drops it, so
#   these series keep `job` and `instance` alone.
# - On Kubernetes, service discovery (kubernetes_sd_configs relabelled to `namespace` and
#   `pod`, or prometheus-operator's ServiceMonitor and PodMonitor) adds `namespace` and
#   `pod` to each target. prometheus-adapter maps a series to a pod through exactly these
#   two labels, so an HPA's Pods metric (`plan --hpa`) finds them; a series grouped by
#   (job, instance) alone would reach no pod.
# One target is one pod, so both groupings give one series per replica: the extra labels
# add no series. If your relabelling names them otherwise (`kubernetes_namespace`,
# `kubernetes_pod_name`), relabel them to `namespace` and `pod`.
# The TTFT/ITL/E2E percentiles and the error ratio are the fleet's: they keep `job`.
"""


def rules_yaml(
    recordings: Sequence[Recording], alerts: Sequence[Alert], timing: Timing
) -> tuple[str, str]:
    """(recording_rules.yml with its `RECORDING_HEADER`, alert_rules.yml)."""
    interval = duration(timing.evaluation_interval_s)
    recorded = {
        "groups": [
            {
                "name": f"{_GROUP}-recording",
                "interval": interval,
                "rules": [{"record": r.record.value, "expr": r.expr} for r in recordings],
            }
        ]
    }
    alerting = {
        "groups": [
            {
                "name": f"{_GROUP}-alerts",
                "interval": interval,
                "rules": [_alert_rule(a) for a in alerts],
            }
        ]
    }
    return RECORDING_HEADER + _dump(recorded), _dump(alerting)


def alertmanager_yaml(alerts: Sequence[Alert]) -> str:
    """An Alertmanager example: every alert mailed; critical ones repeated every hour."""
    names = {a.name for a in alerts}
    document: dict[str, object] = {
        "global": {
            "smtp_smarthost": "smtp.example.com:587",
            "smtp_from": "alertmanager@example.com",
            "smtp_require_tls": True,
        },
        "route": {
            "receiver": "inference-oncall-mail",
            "group_by": ["alertname", "job", "layer"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {
                    "receiver": "inference-oncall-mail",
                    "matchers": ['severity="critical"'],
                    "repeat_interval": "1h",
                }
            ],
        },
        "receivers": [
            {
                "name": "inference-oncall-mail",
                "email_configs": [{"to": "oncall@example.com", "send_resolved": True}],
            }
        ],
    }
    if {"InferTriageKVCacheFull", "InferTriagePreemptions"} <= names:
        document["inhibit_rules"] = [
            {
                "source_matchers": ['alertname="InferTriageKVCacheFull"'],
                "target_matchers": ['alertname="InferTriagePreemptions"'],
                "equal": ["job", "instance"],
            }
        ]
    return _dump(document)
