"""api, level 5: the server a command runs against — a URL, or a twin it starts and stops.

`diagnose` and `validate` take `--url`, or with none a twin scenario; both
see a `Target`: the base URL, where its metrics and DCGM counters are, its
process id when it is on this host, and what is known of its deployment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infertriage.api.collect_thread import CollectorThread
from infertriage.net import metrics_url_of, sync_request
from infertriage.schemas import Deployment, RunClock, RunDir
from infertriage.twin.process import TwinProcess
from infertriage.twin.scenario import load_scenario
from infertriage.twin.scenario_model import Scenario

__all__ = ["Target", "TargetContext", "collector_for", "has_metrics", "twin_target"]


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    metrics_url: str | None
    dcgm_url: str | None
    server_pid: int | None
    deployment: Deployment
    name: str
    profile: bool  # may the command ask it for a profile (/start_profile)?
    # A fleet behind `url` whose replicas Prometheus scrapes: read them there, scrape nothing.
    prometheus: str | None = None
    selector: str = ""
    # A server the command started itself: when its process started (time.monotonic) and
    # how long it took to answer /health with 200 — its cold start. None for a --url server.
    started_s: float | None = None
    health_ready_s: float | None = None


TargetContext = contextlib.AbstractContextManager[Target]  # a server for a `with`'s length


@contextlib.contextmanager
def twin_target(
    scenario: str,
    profile_dir: Path | None = None,
    load_time_s: float | None = 0.2,
    otlp_endpoint: str | None = None,
) -> Iterator[Target]:
    """A twin serving `scenario` on 127.0.0.1 for as long as the `with` lasts; `load_time_s`
    None keeps the scenario's own model load time (validate measures the cold start);
    `otlp_endpoint`: where it exports its request spans."""
    loaded = load_scenario(scenario)
    with TwinProcess(
        scenario, load_time_s=load_time_s, profile_dir=profile_dir, otlp_endpoint=otlp_endpoint
    ) as twin:
        yield Target(
            url=twin.url,
            metrics_url=None,
            dcgm_url=f"{twin.url}/dcgm/metrics",
            server_pid=twin.pid,
            deployment=_twin_deployment(loaded),
            name=f"twin:{scenario}",
            profile=profile_dir is not None,
            started_s=twin.started_s,
            health_ready_s=twin.startup_s,
        )


def _twin_deployment(scenario: Scenario) -> Deployment:
    return Deployment(
        model=scenario.model,
        gpu=scenario.gpu,
        dtype=scenario.dtype,
        tensor_parallel=scenario.tensor_parallel,
        interconnect=scenario.interconnect,
        max_num_seqs=scenario.engine.max_num_seqs,
        max_model_len=scenario.engine.max_model_len,
        num_draft_tokens=scenario.speculative.num_draft_tokens,
        replicas=1,
        pipeline_parallel=scenario.pipeline_parallel.size,
        expert_parallel=scenario.expert_parallel.size,
    )


def has_metrics(url: str) -> bool:
    """Does the server answer /metrics? A server without them is still validated, less fully."""
    return sync_request(metrics_url_of(url), timeout_s=5).status == 200


def collector_for(
    target: Target, run: RunDir, clock: RunClock, *, metrics_optional: bool = False
) -> CollectorThread:
    """The collector of `target`'s metrics, DCGM counters and process, into `run`.

    `metrics_optional`: a server without /metrics (none was named) is still
    watched, its process and the host only, instead of failing the command.
    """
    scrape = not metrics_optional or target.metrics_url is not None or has_metrics(target.url)
    scrape = scrape and target.prometheus is None
    return CollectorThread(
        run,
        clock,
        url=target.url,
        metrics_url=target.metrics_url,
        dcgm_url=target.dcgm_url,
        server_pid=target.server_pid,
        scrape_engine=scrape,
    )
