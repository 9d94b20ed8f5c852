"""api, level 5: `plan --traffic` — replicas over a day, the HPA manifest, the daily cost.

Takes the `PlanSpec` and the base `PlanInputs` of one replica; reads the
traffic CSV, the SLOs (`--slo`, else the defaults) and the cold start (given,
or measured by a `validate` run named with `--from-run`); gives the
`TrafficPlan` and, with `--hpa FILE`, writes the HorizontalPodAutoscaler
manifest there as YAML and, beside it (`FILE-prometheus-adapter.yaml`), the
prometheus-adapter rules that serve its Pods metrics; with `--keda URL` too,
a KEDA ScaledObject querying Prometheus at URL instead of both (KEDA makes
the HPA itself).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from infertriage.api.operations import COLD_START_CHECK
from infertriage.api.specs import PlanSpec
from infertriage.plan.capacity import PlanInputs
from infertriage.plan.traffic import (
    SpotAssumption,
    TrafficPlan,
    make_traffic_plan,
    parse_traffic_csv,
)
from infertriage.schemas import UserError, load_thresholds
from infertriage.schemas.inputs import read_small_text

__all__ = ["adapter_path", "measured_cold_start_s", "traffic_plan"]

_MAX_CURVE_BYTES = 16 * 1024 * 1024  # a day at one row a second is about 3 MiB


def measured_cold_start_s(run_dir: Path) -> float | None:
    """A validate run's process start → first token, when its cold-start check measured it."""
    document = run_dir / "validate.json"
    if not document.is_file():
        return None
    try:
        checks = json.loads(document.read_text(encoding="utf-8")).get("checks", [])
    except (OSError, ValueError):
        return None
    for check in checks:
        if isinstance(check, dict) and check.get("name") == COLD_START_CHECK:
            value = (check.get("figures") or {}).get("first_token_s")
            return float(value) if isinstance(value, int | float) else None
    return None


def _read(path: Path) -> str:
    """The curve's text, read at a bounded cost: /dev/zero or a FIFO is refused unread."""
    why = "a day at one row a second takes about 3 MiB, so it is likely the wrong file."
    return read_small_text(path, f"the traffic curve {path}", _MAX_CURVE_BYTES, why)


def _spot(spec: PlanSpec) -> SpotAssumption | None:
    if spec.spot_cost is None:
        return None
    if spec.spot_interruptions_per_hour < 0 or spec.spot_notice_s < 0:
        raise UserError("--spot-interruptions-per-hour and --spot-notice must not be negative.")
    return SpotAssumption(spec.spot_cost, spec.spot_interruptions_per_hour, spec.spot_notice_s)


def traffic_plan(spec: PlanSpec, inputs: PlanInputs) -> TrafficPlan:
    """The fleet over `spec.traffic` for replicas of `inputs`; writes `spec.hpa` when given."""
    if spec.traffic is None:
        raise UserError("--traffic is required for a plan over a day.")
    points = parse_traffic_csv(_read(spec.traffic), spec.traffic.name)
    thresholds = load_thresholds(spec.slo)
    cold_start = spec.cold_start_s
    if cold_start is None and spec.from_run is not None:
        cold_start = measured_cold_start_s(spec.from_run)
    if cold_start is not None and cold_start < 0:
        raise UserError("--cold-start must not be negative.")
    plan = make_traffic_plan(
        inputs,
        points,
        (thresholds.ttft_p95_s, thresholds.itl_p95_s),
        lead_time_s=cold_start or 0.0,
        gpu_hour_cost=spec.gpu_hour_cost,
        spot=_spot(spec),
    )
    if spec.keda is not None and spec.hpa is None:
        raise UserError("--keda writes a KEDA ScaledObject to the --hpa file: give --hpa FILE.")
    if spec.hpa is not None:
        _check_autoscaler(spec)
        written = _write_autoscaler(spec, spec.hpa, plan)
        plan = dataclasses.replace(plan, written=tuple(str(path) for path in written))
    return plan


def adapter_path(hpa: Path) -> Path:
    """Where the prometheus-adapter rules go beside the HPA: `hpa.yaml` →
    `hpa-prometheus-adapter.yaml`."""
    return hpa.with_name(f"{hpa.stem}-prometheus-adapter{hpa.suffix or '.yaml'}")


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}.") from None


def _yaml(document: object, note: str = "") -> str:
    comment = "".join(f"# {line}".rstrip() + "\n" for line in note.splitlines())
    return comment + yaml.safe_dump(document, sort_keys=False, width=100)


def _check_autoscaler(spec: PlanSpec) -> None:
    """The names and the URL the files carry, as Kubernetes and KEDA will read them."""
    from infertriage.plan.hpa import check_names  # noqa: PLC0415

    check_names(spec.deployment_name, spec.namespace)
    if spec.keda is not None:
        try:
            parts = urlsplit(spec.keda)
            host, credentials = parts.hostname, "@" in parts.netloc
        except ValueError:  # a bracket left open, a port not a number
            host, credentials = None, "@" in spec.keda
        if credentials:  # said without the URL: the user's password stays off the screen
            raise UserError(
                "--keda's URL carries a user name or password, which the ScaledObject would "
                "store in plain text: give the URL without them, and the credentials in a "
                "Secret through a KEDA TriggerAuthentication (authModes: basic) that each "
                "trigger's authenticationRef names."
            )
        if not spec.keda.startswith(("http://", "https://")) or not host:
            raise UserError(
                f"--keda takes Prometheus's http:// or https:// URL, not {spec.keda!r}."
            )


def _write_autoscaler(spec: PlanSpec, hpa: Path, plan: TrafficPlan) -> tuple[Path, ...]:
    """The HPA and the adapter's rules; or, with `--keda`, the ScaledObject alone: the
    files written."""
    deployment, namespace = spec.deployment_name, spec.namespace
    if spec.keda is not None:
        from infertriage.plan.keda import make_scaled_object  # noqa: PLC0415

        _write(hpa, _yaml(make_scaled_object(plan, deployment, namespace, spec.keda)))
        return (hpa,)
    from infertriage.plan.adapter import ADAPTER_NOTE, adapter_config  # noqa: PLC0415
    from infertriage.plan.hpa import SCALING_METRICS, make_hpa_manifest  # noqa: PLC0415

    _write(hpa, _yaml(make_hpa_manifest(plan, deployment, namespace)))
    rules = adapter_config(SCALING_METRICS.values())
    _write(adapter_path(hpa), _yaml(rules, ADAPTER_NOTE))
    return hpa, adapter_path(hpa)
