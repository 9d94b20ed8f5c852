"""Typed checks of the autoscaling files `plan --hpa` writes, each from its consumer's source.

- `strict_kubernetes(data, "V2HorizontalPodAutoscaler")`: the kubernetes
  client's models, built field by field, an unknown key refused (the client's
  own deserializer drops it silently).
- `AdapterConfig`: prometheus-adapter's `MetricsDiscoveryConfig`
  (kubernetes-sigs/prometheus-adapter `pkg/config/config.go`, read at commit
  0536a5d4; v0.12.0 is the current release), read as its
  `pkg/config/loader.go` reads it (`yaml.UnmarshalStrict`: an unknown field is
  an error), with the checks `pkg/naming/metric_namer.go` makes when it builds
  a rule (the name regex compiles, `as` is given where it has no default, each
  series filter has `is` or `isNot`), and `api_name` and `fill_metrics_query`
  doing what `MetricNameForSeries` and `metricsQuery.Build`
  (`pkg/naming/metrics_query.go`) do: the name's regex expansion, and the
  template filled with the series, `namespace="NS",pod=~"A|B"` (the namespace
  matcher first, `=~` for more than one object) and the resource's label.
- `ScaledObject`: KEDA's `apis/keda/v1alpha1` types (`scaledobject_types.go`
  at commit 01ee1d30, `scaletriggers_types.go` at 1a230280; the CRD
  `config/crd/bases/keda.sh_scaledobjects.yaml` requires `scaleTargetRef` and
  `triggers`, and each trigger's `type` and `metadata`), its HPA behaviour
  checked by the kubernetes client's `V2HorizontalPodAutoscalerBehavior`, and
  a `prometheus` trigger's metadata by the keys
  `pkg/scalers/prometheus_scaler.go` (at 0805d72e) parses (`serverAddress`,
  `query` and a float `threshold` required).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "AdapterConfig",
    "DiscoveryRule",
    "ScaledObject",
    "api_name",
    "fill_metrics_query",
    "strict_kubernetes",
]

_LIST = re.compile(r"^list\[(.+)\]$", re.IGNORECASE)
_PRIMITIVES: dict[str, type] = {"str": str, "int": int, "bool": bool, "float": float}


def strict_kubernetes(data: Any, type_name: str, path: str = "") -> Any:
    """Build the kubernetes model `type_name` from `data`, refusing unknown keys and letting
    the models check the rest (required fields, enums)."""
    from kubernetes import client  # noqa: PLC0415  # the dev extra: callers skip without it

    match = _LIST.match(type_name)
    if match:
        assert isinstance(data, list), f"{path}: a list expected"
        return [strict_kubernetes(item, match[1], f"{path}[{i}]") for i, item in enumerate(data)]
    if type_name == "object":
        return data
    if type_name in _PRIMITIVES:
        assert isinstance(data, _PRIMITIVES[type_name]), f"{path}: {type_name}, not {data!r}"
        return data
    model = getattr(client, type_name)
    assert isinstance(data, dict), f"{path}: a mapping expected for {type_name}"
    by_json = {json_key: attr for attr, json_key in model.attribute_map.items()}
    unknown = set(data) - set(by_json)
    assert not unknown, f"{path}: {type_name} has no field {sorted(unknown)}"
    kwargs = {
        by_json[key]: strict_kubernetes(value, model.openapi_types[by_json[key]], f"{path}.{key}")
        for key, value in data.items()
    }
    return model(**kwargs)


class _Strict(BaseModel):
    """Go's yaml.UnmarshalStrict: no unknown field; strings are strings."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


# prometheus-adapter, pkg/config/config.go
class GroupResource(_Strict):
    group: str = ""
    resource: str


class ResourceMapping(_Strict):
    template: str = ""
    overrides: dict[str, GroupResource] = Field(default_factory=dict)


class RegexFilter(_Strict):
    is_: str = Field(default="", alias="is")
    is_not: str = Field(default="", alias="isNot")

    @model_validator(mode="after")
    def _one_of(self) -> RegexFilter:  # metric_namer.go NewReMatcher
        assert bool(self.is_) != bool(self.is_not), "a filter has `is` or `isNot`, one of them"
        re.compile(self.is_ or self.is_not)
        return self


class NameMapping(_Strict):
    matches: str = ""
    as_: str = Field(default="", alias="as")


class LabelValueReplacement(_Strict):
    find: str = ""
    replace: str = ""


_TEMPLATE_ACTION = re.compile(r"<<(.*?)>>")
_TEMPLATE_FIELDS = {".Series", ".LabelMatchers", ".GroupBy", ".LabelValuesByName", ".GroupBySlice"}


class DiscoveryRule(_Strict):
    series_query: str = Field(alias="seriesQuery")
    series_filters: list[RegexFilter] = Field(default_factory=list, alias="seriesFilters")
    resources: ResourceMapping = Field(default_factory=ResourceMapping)
    name: NameMapping = Field(default_factory=NameMapping)
    metrics_query: str = Field(default="", alias="metricsQuery")
    label_value_replacements: list[LabelValueReplacement] = Field(
        default_factory=list, alias="labelValueReplacements"
    )

    @field_validator("metrics_query")
    @classmethod
    def _template(cls, value: str) -> str:
        """The `<<`/`>>` template's actions name only queryTemplateArgs' fields."""
        for action in _TEMPLATE_ACTION.findall(value):
            assert action.strip() in _TEMPLATE_FIELDS, f"unknown template action <<{action}>>"
        return value

    @model_validator(mode="after")
    def _namer(self) -> DiscoveryRule:  # metric_namer.go NamersFromConfig
        groups = re.compile(self.name.matches or ".*").groups
        assert self.name.as_ or groups <= 1, "`as` is required with more than one capture group"
        return self


class AdapterConfig(_Strict):
    rules: list[DiscoveryRule]
    resource_rules: dict[str, Any] | None = Field(default=None, alias="resourceRules")
    external_rules: list[DiscoveryRule] = Field(default_factory=list, alias="externalRules")


def api_name(rule: DiscoveryRule, series: str) -> str | None:
    """`MetricNameForSeries`: the series' name in the API, None where `matches` refuses it
    (Go's unanchored `FindStringSubmatchIndex`, then `ExpandString` of `as`)."""
    pattern = re.compile(rule.name.matches or ".*")
    found = pattern.search(series)
    if found is None:
        return None
    template = rule.name.as_ or ("$0" if pattern.groups == 0 else "$1")
    return re.sub(r"\$\{(\d+)\}|\$(\d+)", lambda m: found.group(int(m[1] or m[2])) or "", template)


def fill_metrics_query(
    rule: DiscoveryRule, series: str, namespace: str, resource_label: str, names: list[str]
) -> str:
    """`metricsQuery.Build` for a namespaced resource: `namespace` label (its override's
    label for the namespace resource) first, then the resource's."""
    namespace_label = next(
        label for label, gr in rule.resources.overrides.items() if gr.resource == "namespace"
    )
    matchers = [f'{namespace_label}="{namespace}"']
    target = "|".join(names)
    matchers.append(
        f'{resource_label}=~"{target}"' if len(names) > 1 else f'{resource_label}="{target}"'
    )
    values = {
        ".Series": series,
        ".LabelMatchers": ",".join(matchers),
        ".GroupBy": resource_label,
    }
    return _TEMPLATE_ACTION.sub(lambda m: values[m[1].strip()], rule.metrics_query)


# KEDA, apis/keda/v1alpha1
class ScaleTarget(_Strict):
    name: str
    api_version: str = Field(default="", alias="apiVersion")
    kind: str = ""
    env_source_container_name: str = Field(default="", alias="envSourceContainerName")


class HorizontalPodAutoscalerConfig(_Strict):
    behavior: dict[str, Any] | None = None
    name: str = ""

    @field_validator("behavior")
    @classmethod
    def _kubernetes(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            strict_kubernetes(value, "V2HorizontalPodAutoscalerBehavior", "behavior")
        return value


class AdvancedConfig(_Strict):
    horizontal_pod_autoscaler_config: HorizontalPodAutoscalerConfig | None = Field(
        default=None, alias="horizontalPodAutoscalerConfig"
    )
    restore_to_original_replica_count: bool = Field(
        default=False, alias="restoreToOriginalReplicaCount"
    )


class AuthenticationRef(_Strict):
    name: str
    kind: str = ""


# pkg/scalers/prometheus_scaler.go: prometheusMetadata's `keda:"name=…"` keys
_PROMETHEUS_REQUIRED = {"serverAddress", "query", "threshold"}
_PROMETHEUS_OPTIONAL = {
    "queryParameters",
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "unsafeSsl",
    "awsRegion",
    "timeout",
    "identityOwner",
    "authModes",
}


class ScaleTriggers(_Strict):
    type: str
    name: str = ""
    use_cached_metrics: bool = Field(default=False, alias="useCachedMetrics")
    metadata: dict[str, str]
    authentication_ref: AuthenticationRef | None = Field(default=None, alias="authenticationRef")
    metric_type: str = Field(default="", alias="metricType")

    @model_validator(mode="after")
    def _prometheus(self) -> ScaleTriggers:
        assert self.metric_type in {"", "AverageValue", "Value", "Utilization"}
        if self.type == "prometheus":
            keys = set(self.metadata)
            assert keys >= _PROMETHEUS_REQUIRED, f"missing {_PROMETHEUS_REQUIRED - keys}"
            assert keys <= _PROMETHEUS_REQUIRED | _PROMETHEUS_OPTIONAL, keys
            float(self.metadata["threshold"])
            for flag in ("ignoreNullValues", "unsafeSsl"):
                if flag in self.metadata:
                    assert self.metadata[flag] in {"true", "false"}, self.metadata[flag]
        return self


class ScaledObjectSpec(_Strict):
    scale_target_ref: ScaleTarget = Field(alias="scaleTargetRef")
    polling_interval: int | None = Field(default=None, alias="pollingInterval")
    cooldown_period: int | None = Field(default=None, alias="cooldownPeriod")
    idle_replica_count: int | None = Field(default=None, alias="idleReplicaCount")
    min_replica_count: int | None = Field(default=None, alias="minReplicaCount")
    max_replica_count: int | None = Field(default=None, alias="maxReplicaCount")
    advanced: AdvancedConfig | None = None
    triggers: list[ScaleTriggers]

    @model_validator(mode="after")
    def _bounds(self) -> ScaledObjectSpec:  # CheckReplicaCountBoundsAreValid, ValidateTriggers
        low, high = self.min_replica_count or 0, self.max_replica_count or 100
        assert low <= high, f"minReplicaCount {low} above maxReplicaCount {high}"
        names = [t.name for t in self.triggers if t.name]
        assert len(names) == len(set(names)), f"trigger names repeat: {names}"
        return self


class ObjectMeta(_Strict):
    name: str
    namespace: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ScaledObject(_Strict):
    api_version: str = Field(alias="apiVersion", pattern=r"^keda\.sh/v1alpha1$")
    kind: str = Field(pattern=r"^ScaledObject$")
    metadata: ObjectMeta
    spec: ScaledObjectSpec
