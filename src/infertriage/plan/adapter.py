"""plan, level 1: prometheus-adapter's rules that serve the HPA's Pods metrics.

Takes the `PodsMetric`s an HPA scales on (`plan.hpa.SCALING_METRICS`); gives
the adapter's configuration as a plain mapping (the api writes it as YAML):
the document its `--config` file holds, `rules:` (the prometheus-community
Helm chart takes the same list under `rules.custom`). One discovery rule per
metric: its `seriesQuery` the recorded series where `namespace` and `pod`
are set, those two labels mapped to the namespace and pod resources, the
series renamed to the metric's API name, and a `metricsQuery` that
aggregates per pod. Field names as prometheus-adapter's config structs
spell them (`pkg/config/config.go`; v0.12.0 is the current release), which
it reads with yaml.UnmarshalStrict: an unknown field stops the adapter.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from infertriage.plan.hpa import PodsMetric
from infertriage.schemas.recorded import POD_LABELS

__all__ = ["ADAPTER_NOTE", "adapter_config", "adapter_rule"]

ADAPTER_NOTE = """\
prometheus-adapter rules for the HPA that `infertriage plan --hpa` wrote beside this file.
Use: add these rules to the adapter's --config file (with the prometheus-community Helm
chart: under `rules.custom`), then check that the API serves them:
  kubectl get --raw "/apis/custom.metrics.k8s.io/v1beta1/namespaces/NS/pods/*/METRIC"
They read the series `infertriage monitor-config` records, which keep `namespace` and `pod`
where Kubernetes service discovery sets them; the adapter maps a series to its pod through
those two labels.
"""


def adapter_rule(metric: PodsMetric) -> dict[str, Any]:
    """One discovery rule: `metric.recorded` on pods, served as `metric.name`."""
    namespace, pod = POD_LABELS
    series = metric.recorded.value
    return {
        "seriesQuery": f'{series}{{{namespace}!="",{pod}!=""}}',
        "resources": {
            "overrides": {namespace: {"resource": "namespace"}, pod: {"resource": "pod"}},
        },
        "name": {"matches": f"^{series}$", "as": metric.name},
        # the adapter fills in the series, `namespace="NS",pod=~"A|B"` and `pod`
        "metricsQuery": f"{metric.aggregate}(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)",
    }


def adapter_config(metrics: Iterable[PodsMetric]) -> dict[str, Any]:
    """The adapter's configuration document for `metrics`."""
    return {"rules": [adapter_rule(metric) for metric in metrics]}
