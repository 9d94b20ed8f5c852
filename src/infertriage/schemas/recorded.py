"""schemas, level 0: the names of the series `monitor-config`'s recording rules write.

Stable: the monitoring config writes them (`report.monitoring`), the HPA
manifest `plan --hpa` writes scales on them (`plan.hpa`), and users'
dashboards read them; one definition for all. `REPLICA_LABELS` are the
labels a per-replica series keeps: `job` and `instance` (any Prometheus)
and `namespace` and `pod` (where Kubernetes service discovery relabels
them: prometheus-adapter maps a series to its pod through them).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["POD_LABELS", "REPLICA_LABELS", "Recorded"]

# The labels that name a pod, as Kubernetes service discovery (and prometheus-operator's
# ServiceMonitor and PodMonitor) set them.
POD_LABELS = ("namespace", "pod")
# A replica: a scrape target anywhere; its pod on Kubernetes (absent elsewhere: a
# `by` over a missing label drops it, so the same rule serves both).
REPLICA_LABELS = ("job", "instance", *POD_LABELS)


class Recorded(StrEnum):
    """The series the recording rules write; `per_replica` ones keep `REPLICA_LABELS`,
    the others keep `job` (the fleet)."""

    WAITING = "infertriage:waiting_requests:per_replica"
    RUNNING = "infertriage:running_requests:per_replica"
    KV_USAGE = "infertriage:kv_usage:per_replica"
    GENERATION_TOKENS = "infertriage:generation_tokens_per_second:per_replica"
    PROMPT_TOKENS = "infertriage:prompt_tokens_per_second:per_replica"
    PREEMPTIONS = "infertriage:preemptions_per_second:per_replica"
    PREFIX_HIT_RATE = "infertriage:prefix_cache_hit_rate:per_replica"
    FINISHED = "infertriage:requests_finished_per_second:per_replica"
    FAILED = "infertriage:requests_failed_per_second:per_replica"
    ERROR_RATIO = "infertriage:request_error_ratio:fleet"
    TTFT_P50 = "infertriage:ttft_seconds:p50"
    TTFT_P95 = "infertriage:ttft_seconds:p95"
    TTFT_P99 = "infertriage:ttft_seconds:p99"
    ITL_P50 = "infertriage:itl_seconds:p50"
    ITL_P95 = "infertriage:itl_seconds:p95"
    ITL_P99 = "infertriage:itl_seconds:p99"
    E2E_P50 = "infertriage:e2e_seconds:p50"
    E2E_P95 = "infertriage:e2e_seconds:p95"
    E2E_P99 = "infertriage:e2e_seconds:p99"
    GPU_UTIL = "infertriage:gpu_util:ratio"
    GPU_FB_USED = "infertriage:gpu_fb_used:bytes"
