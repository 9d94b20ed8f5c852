"""monitor-config's rules checked by Prometheus's own tool (`promtool`, Debian `prometheus`).

For every engine: the generated rule files pass `promtool check rules`, and
the generated unit-test file (`rules_test.yml`, input series in the engine's
own names) passes `promtool test rules`. Then the real captures of
shared/fixtures/metrics are fed to promtool as input series, exactly as a
server writes them (`tgi_request_success` without `_total`,
`vllm:num_preemptions_total` with it, vLLM's V0 and V1 names side by side):
every recording rule and every alert's signal selects series in the capture
exactly when collect's adapter finds the metric it reads there. Skips
without promtool.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from infertriage.collect.adapters import adapt
from infertriage.collect.adapters.base import Availability
from infertriage.collect.adapters.dcgm import DCGM
from infertriage.collect.parse import parse_metrics_text
from infertriage.engines import LLAMACPP, SGLANG, TGI, TRTLLM, VLLM, EngineAdapter
from infertriage.report.monitoring import (
    AlertLimits,
    MonitorConfig,
    Recorded,
    Timing,
    make_monitor_config,
)
from infertriage.report.monitoring.promql import duration
from infertriage.report.monitoring.rulefiles import alert_annotations
from infertriage.schemas import Thresholds

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is absent (Debian: apt-get install prometheus)"
)
ENGINES = {"vllm": VLLM, "sglang": SGLANG, "tgi": TGI, "llamacpp": LLAMACPP, "trtllm": TRTLLM}
CAPTURES = [
    ("vllm", "vllm.txt"),
    ("sglang", "sglang.txt"),
    ("tgi", "tgi.txt"),
    ("llamacpp", "llamacpp.txt"),
    ("trtllm", "trtllm_triton.txt"),
    ("trtllm", "triton.txt"),
]
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")
_TYPE = re.compile(r"^# TYPE (\S+) (\S+)")
_STEP_S, _STEPS = 30, 40
_BASELINE_TOK_S = 1000.0  # so that the throughput alert is made and checked too


def _limits() -> AlertLimits:
    return AlertLimits.of(Thresholds()).with_baseline(0.2, 0.03, _BASELINE_TOK_S, "a test")


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def _write(config: MonitorConfig, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in config.files.items():
        (folder / name).write_text(text)
    return folder


@needs_promtool
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize(
    "timing", [Timing(), Timing(2.0, 1 / 600, 0.5)], ids=["production", "demo-scale"]
)
def test_the_generated_rules_pass_promtool_check_and_their_own_unit_tests(
    engine: str, timing: Timing, tmp_path: Path
) -> None:
    config = make_monitor_config(ENGINES[engine], _limits(), timing)
    folder = _write(config, tmp_path)
    checked = _promtool("check", "rules", "recording_rules.yml", "alert_rules.yml", cwd=folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(config.alerts)} rules found" in checked.stdout
    tested = _promtool("test", "rules", "rules_test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    cases = yaml.safe_load((folder / "rules_test.yml").read_text())["tests"]
    assert cases, "every engine feeds at least one alert case"


def _series(text: str, labels: str) -> list[dict[str, str]]:
    """Each sample of a capture as a promtool input series, named and labelled as written;
    counters and histograms grow by one a step, gauges hold."""
    types: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if found := _TYPE.match(line):
            types[found.group(1)] = found.group(2)
        if line.startswith("#") or not (found := _LINE.match(line.strip())):
            continue
        name, block, value = found.group(1), found.group(2) or "{}", float(found.group(3))
        if not math.isfinite(value):
            continue
        family = re.sub(r"_(bucket|count|sum|total)$", "", name)
        kind = types.get(name) or types.get(family, "untyped")
        # counters, and the buckets, counts and sums of histograms and summaries, grow
        grows = kind == "counter" or (kind in {"histogram", "summary"} and name != family)
        inside = block[1:-1].rstrip(",")
        merged = f"{{{inside + ', ' if inside else ''}{labels}}}"
        out.append({"series": name + merged, "values": f"{value:.12g}+{int(grows)}x{_STEPS}"})
    return out


def _found(adapter: EngineAdapter | None, text: str) -> set[str]:
    """The names collect's adapters find in a capture (dcgm-exporter's with no engine)."""
    exposition = parse_metrics_text(text, "capture")
    tables = adapter.metrics if adapter is not None else (DCGM,)
    return {
        status.name
        for table in tables
        for status in adapt(exposition, table).statuses
        if status.status is Availability.PRESENT
    }


def _check(expr: str, selects: bool) -> dict[str, object]:
    return {
        "expr": f"count(({expr})) > bool 0",
        "eval_time": f"{_STEP_S * (_STEPS - 5)}s",
        "exp_samples": [{"labels": "{}", "value": 1}] if selects else [],
    }


@needs_promtool
@pytest.mark.parametrize(("engine", "capture"), CAPTURES)
def test_every_expression_selects_the_real_capture_where_the_adapter_finds_its_metric(
    engine: str, capture: str, tmp_path: Path, shared_fixture
) -> None:  # type: ignore[no-untyped-def]
    adapter = ENGINES[engine]
    text = shared_fixture(f"metrics/{capture}").read_text()
    dcgm = shared_fixture("metrics/dcgm.txt").read_text()
    config = make_monitor_config(adapter, _limits(), Timing())
    folder = _write(config, tmp_path)
    found, gpu_found = _found(adapter, text), _found(None, dcgm)
    expected: dict[str, bool] = {}
    checks = []
    for rule in config.recordings:
        names = [n for n in rule.source.split(" ") if "." in n]
        there = gpu_found if rule.source.startswith("gpu.") else found
        expected[rule.record.value] = all(n in there for n in names)
        checks.append(_check(rule.record.value, expected[rule.record.value]))
    for alert in config.alerts:
        used = [r.value for r in Recorded if r.value in alert.signal]
        if used:
            selects = all(expected[name] for name in used)
        else:  # the restart: a start time, or counters that can reset
            selects = bool(found & {"proc.start_time_s", "tokens.generation", "requests.finished"})
        checks.append(_check(alert.signal, selects))
    document = {
        "rule_files": ["recording_rules.yml", "alert_rules.yml"],
        "evaluation_interval": f"{_STEP_S}s",
        "tests": [
            {
                "interval": f"{_STEP_S}s",
                "input_series": _series(text, f'job="{engine}", instance="replica-0:8000"')
                + _series(dcgm, 'job="dcgm", instance="gpu-node:9400"'),
                "promql_expr_test": checks,
            }
        ],
    }
    (folder / "capture_test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    tested = _promtool("test", "rules", "capture_test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    # the capture feeds the core of the map: queue and tokens (or latency) for every engine
    assert expected[Recorded.WAITING.value]
    assert sum(expected.values()) >= 6, expected


@needs_promtool
def test_a_restart_alert_is_the_engines_not_any_process_that_exports_a_start_time(
    tmp_path: Path,
) -> None:
    config = make_monitor_config(VLLM, _limits(), Timing())
    folder = _write(config, tmp_path)
    replica = 'job="vllm", instance="replica-0:8000"'
    restart = next(a for a in config.alerts if a.name == "InferTriageServerRestart")
    document = {
        "rule_files": ["recording_rules.yml", "alert_rules.yml"],
        "evaluation_interval": "30s",
        "tests": [
            {
                "interval": "30s",
                "input_series": [
                    # the replica restarts at 3 min; Prometheus itself at 2 min
                    {
                        "series": f"process_start_time_seconds{{{replica}}}",
                        "values": "100x5 400x20",
                    },
                    {
                        "series": 'process_start_time_seconds{job="prometheus", instance="p:9090"}',
                        "values": "50x3 200x20",
                    },
                    {"series": f"vllm:num_requests_waiting{{{replica}}}", "values": "0x25"},
                ],
                "alert_rule_test": [
                    {"eval_time": "2m", "alertname": restart.name, "exp_alerts": []},
                    {
                        "eval_time": "4m",
                        "alertname": restart.name,
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "job": "vllm",
                                    "instance": "replica-0:8000",
                                    "severity": "warning",
                                    "layer": "application",
                                },
                                "exp_annotations": alert_annotations(
                                    restart, "http://replica-0:8000", "vllm"
                                ),
                            }
                        ],
                    },
                ],
            }
        ],
    }
    (folder / "restart_test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    tested = _promtool("test", "rules", "restart_test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]


@needs_promtool
@pytest.mark.parametrize(
    "timing", [Timing(), Timing(2.0, 1 / 600, 0.5)], ids=["production", "demo-scale"]
)
@pytest.mark.parametrize(
    ("waiting", "raised"),
    [
        # an async engine holds each arrival for a step: the gauge flickers on a healthy server
        ("0 1 0 0 2 0 1 0 0 1 " * 6, False),
        ("1+1x60", True),  # one more request waiting every step: arrivals outpace the server
    ],
    ids=["flickering", "growing"],
)
def test_the_queue_alert_is_raised_by_a_queue_that_grows_not_by_one_that_flickers(
    tmp_path: Path, timing: Timing, waiting: str, raised: bool
) -> None:
    """The flicker never satisfies the alert's expression, not even for one evaluation
    (a pending alert is a page once `for:` is scaled down); the growing queue fires."""
    config = make_monitor_config(VLLM, _limits(), timing)
    folder = _write(config, tmp_path)
    step = timing.evaluation_interval_s
    replica = 'job="vllm", instance="replica-0:8000"'
    alert = next(a for a in config.alerts if a.name == "InferTriageQueueGrowing")
    labels = {"job": "vllm", "instance": "replica-0:8000"}
    expected = {
        "exp_labels": labels | {"severity": "warning", "layer": "scheduling"},
        "exp_annotations": alert_annotations(alert, "http://replica-0:8000", "vllm"),
    }
    case: dict[str, object] = {
        "interval": duration(step),
        "input_series": [{"series": f"vllm:num_requests_waiting{{{replica}}}", "values": waiting}],
        # past the window and the `for:` of either timing
        "alert_rule_test": [
            {
                "eval_time": duration(58 * step),
                "alertname": alert.name,
                "exp_alerts": [expected] if raised else [],
            }
        ],
    }
    if not raised:
        case["promql_expr_test"] = [
            {"expr": alert.expr, "eval_time": duration(n * step), "exp_samples": []}
            for n in range(1, 60)
        ]
    document = {
        "rule_files": ["recording_rules.yml", "alert_rules.yml"],
        "evaluation_interval": duration(step),
        "tests": [case],
    }
    (folder / "queue_test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    tested = _promtool("test", "rules", "queue_test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]


@needs_promtool
@pytest.mark.parametrize(
    ("running", "raised", "waiting_series"),
    [((1, 0), False, True), ((9, 1), True, True), ((9, 1), True, False)],
    ids=[
        "nearly idle: half a request above the mean",
        "four requests above the mean",
        "four above the mean, no waiting series: waits for nothing",
    ],
)
def test_the_replica_imbalance_alert_needs_a_request_in_flight_above_the_mean_replica(
    tmp_path: Path, running: tuple[int, int], raised: bool, waiting_series: bool
) -> None:
    """Two replicas generating 40 and 10 tokens/s (1.6× the mean) for half an hour: uneven
    only where the busiest holds `min_excess_requests` more in flight than the mean one; a
    nearly idle fleet's ratio is a few arrivals' chance (as `application.replica_imbalance`
    reads it), where the alert paged on it."""
    config = make_monitor_config(VLLM, _limits(), Timing())
    folder = _write(config, tmp_path)
    alert = next(a for a in config.alerts if a.name == "InferTriageReplicaImbalance")
    series = []
    for name, tok_s, busy in (("a", 40, running[0]), ("b", 10, running[1])):
        replica = f'job="vllm", instance="{name}:8000"'
        series += [
            {
                "series": f"vllm:generation_tokens_total{{{replica}}}",
                "values": f"0+{tok_s * 30}x60",
            },
            {"series": f"vllm:num_requests_running{{{replica}}}", "values": f"{busy}x60"},
        ]
        if waiting_series:
            series.append({"series": f"vllm:num_requests_waiting{{{replica}}}", "values": "0x60"})
    expected = {
        "exp_labels": {"job": "vllm", "severity": "warning", "layer": "application"},
        "exp_annotations": alert_annotations(alert, "http://", "vllm"),
    }
    case = {
        "interval": "30s",
        "input_series": series,
        "alert_rule_test": [
            {
                "eval_time": "28m",
                "alertname": alert.name,
                "exp_alerts": [expected] if raised else [],
            }
        ],
    }
    document = {
        "rule_files": ["recording_rules.yml", "alert_rules.yml"],
        "evaluation_interval": "30s",
        "tests": [case],
    }
    (folder / "imbalance_test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    tested = _promtool("test", "rules", "imbalance_test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
