"""cli, level 6: every flag two or more commands take, each declared once.

One function per flag: its name, help, parser (the one per unit: `seconds`, a URL, a
workload), environment variable and callback are written here and nowhere else; the
command passes the default it starts from (its spec's, e.g. `bench --duration` none,
`diagnose --duration 60s`) and the type is the command's parameter's (`bench --rate`
takes a list of levels, `validate --rate` one). A flag one command takes is declared
in that command's module, once too. Ranges are not checked here: a value is checked
once, on the command's spec (`schemas.spec.CommandSpec`), which the command makes
before any work. A flag name two definitions share means two things; `tests/cli/
test_flags.py` lists each such name with its reason, and fails on any other.
"""

from __future__ import annotations

from typing import Any

import typer

from infertriage.cli.options import (
    folder,
    gpu_name,
    http_url,
    new_file,
    scenario_name,
    seconds,
    workload_spec,
)

__all__ = [
    "ab_urls",
    "api_key",
    "catalog_model",
    "concurrency",
    "dcgm_url",
    "dtype",
    "duration",
    "endpoint",
    "export",
    "force",
    "gpu",
    "html",
    "input_len",
    "json_out",
    "locust_master_host",
    "locust_workers",
    "markdown",
    "metrics_url",
    "nccl_tests",
    "num_requests",
    "nvidia_smi_topo",
    "out",
    "output_len",
    "planned_concurrency",
    "planned_max_model_len",
    "profile_dir",
    "progress",
    "prometheus",
    "rate",
    "scenario",
    "seed",
    "selector",
    "served_model",
    "server_max_model_len",
    "server_pid",
    "slo",
    "store",
    "timeout",
    "tokenizer",
    "tp",
    "url",
    "workload",
]


# --- the server and how requests reach it (bench, diagnose, validate, compare) -------------


def url(default: Any = None) -> Any:
    return typer.Option(
        default,
        "--url",
        metavar="URL",
        envvar="OPENAI_BASE_URL",
        show_envvar=True,
        callback=http_url,
        help=(
            "Server base URL (a trailing /v1 is fine); without it diagnose and validate "
            "use the twin."
        ),
    )


def ab_urls() -> Any:
    """compare's A/B: two servers, A then B; no environment variable (it holds one URL, and
    `compare BASE RUN` must not turn into an A/B when it is set)."""
    return typer.Option(
        [],
        "--url",
        metavar="URL",
        callback=http_url,
        help="A/B: the two servers, A then B (--url A --url B).",
    )


def served_model() -> Any:
    return typer.Option(None, "--model", metavar="NAME", help="Served model (default: the first).")


def endpoint() -> Any:
    return typer.Option(
        "chat", "--endpoint", metavar="chat|completions", help="chat or completions."
    )


def api_key() -> Any:
    return typer.Option(
        None,
        "--api-key",
        metavar="KEY",
        envvar="OPENAI_API_KEY",
        show_default=False,
        help="Bearer key; sent, never stored.",
    )


def tokenizer() -> Any:
    return typer.Option(
        None, "--tokenizer", metavar="PATH", help="The model's tokenizer.json, a local file."
    )


def server_max_model_len() -> Any:
    return typer.Option(
        None,
        "--max-model-len",
        metavar="TOKENS",
        help="The server's context, where it does not say it.",
    )


def metrics_url() -> Any:
    return typer.Option(
        None, "--metrics-url", metavar="URL", callback=http_url, help="Default URL/metrics."
    )


def dcgm_url() -> Any:
    return typer.Option(
        None, "--dcgm-url", metavar="URL", callback=http_url, help="dcgm-exporter /metrics."
    )


def server_pid() -> Any:
    return typer.Option(None, "--server-pid", metavar="PID", help="The server's process.")


def prometheus() -> Any:
    return typer.Option(
        None,
        "--prometheus",
        metavar="URL",
        callback=http_url,
        help="A Prometheus server: read the replicas it scrapes instead.",
    )


def selector() -> Any:
    return typer.Option(
        "",
        "--selector",
        metavar="MATCHERS",
        help='Label matchers of the engine\'s series, e.g. job="vllm".',
    )


# --- the load ------------------------------------------------------------------------------


def workload(default: str | None = "chat-mix") -> Any:
    return typer.Option(
        default,
        "--workload",
        parser=workload_spec,
        metavar="SPEC",
        help="chat-mix, synthetic:…, prefix:…, trace:F, … (a spec or a file).",
    )


def rate(default: Any = None) -> Any:
    return typer.Option(
        default,
        "--rate",
        metavar="RATE",
        help=(
            "Open-loop requests/s (bench: levels, e.g. 1,2,4 or inf; simulate: default 4; "
            "plan: the rate to size P/D and layouts for)."
        ),
    )


def concurrency(default: Any = None) -> Any:
    return typer.Option(
        default,
        "--concurrency",
        metavar="N",
        help="Closed-loop users (bench: levels, e.g. 1,4,16).",
    )


def duration(default: str | None = None) -> Any:
    return typer.Option(
        default,
        "--duration",
        metavar="DURATION",
        parser=seconds,
        help="Load for this long: 60, 90s, 2m.",
    )


def num_requests() -> Any:
    return typer.Option(
        None,
        "--num-requests",
        metavar="N",
        help="Requests to send (bench: per level; compare: per server; simulate: default 1000).",
    )


def seed(default: int | None = 0) -> Any:
    return typer.Option(
        default,
        "--seed",
        metavar="N",
        help="Seed of the workload and arrivals (simulate: default the scenario's).",
    )


def timeout(default: str | None) -> Any:
    return typer.Option(
        default, "--timeout", metavar="DURATION", parser=seconds, help="Per-request timeout."
    )


def locust_workers() -> Any:
    return typer.Option(
        None, "--locust-workers", metavar="N", help="Drive the load with Locust: N workers."
    )


def locust_master_host() -> Any:
    return typer.Option(
        None,
        "--locust-master-host",
        metavar="HOST[:PORT]",
        help="HOST[:PORT] the master binds; workers join it.",
    )


# --- the twin ------------------------------------------------------------------------------


def scenario() -> Any:
    return typer.Option(
        "healthy",
        "--scenario",
        metavar="SCENARIO",
        callback=scenario_name,
        help="Twin scenario (name or YAML).",
    )


def profile_dir() -> Any:
    return typer.Option(
        None,
        "--profile-dir",
        metavar="DIR",
        help=(
            "Where the server writes profiler traces (VLLM_TORCH_PROFILER_DIR; the twin "
            "serves /start_profile with it)."
        ),
    )


# --- the model and the hardware (plan, topology, diagnose's roofline) ----------------------


def catalog_model(default: Any = ...) -> Any:
    return typer.Option(
        default, "--model", metavar="MODEL", help="Catalog preset or path to an HF config.json."
    )


def gpu(default: Any = ...) -> Any:
    return typer.Option(
        default,
        "--gpu",
        metavar="GPU",
        callback=gpu_name,
        help="GPU from the catalog, e.g. H100-SXM.",
    )


def tp() -> Any:
    return typer.Option(1, "--tp", metavar="N", help="Tensor-parallel size.")


def pp() -> Any:
    return typer.Option(1, "--pp", metavar="N", help="Pipeline-parallel size.")


def ep() -> Any:
    return typer.Option(1, "--ep", metavar="N", help="Expert-parallel size.")


def planned_max_model_len() -> Any:
    return typer.Option(8192, "--max-model-len", metavar="TOKENS", help="Longest request (tokens).")


def planned_concurrency(default: int | None) -> Any:
    return typer.Option(
        default, "--concurrency", metavar="N", help="Concurrent requests (the batch per replica)."
    )


def input_len() -> Any:
    return typer.Option(None, "--input-len", metavar="TOKENS", help="Prompt tokens per request.")


def output_len() -> Any:
    return typer.Option(None, "--output-len", metavar="TOKENS", help="Output tokens per request.")


def dtype() -> Any:
    return typer.Option(
        "bf16", "--dtype", metavar="DTYPE", help="Weights: bf16, fp8, int8, int4, awq…"
    )


def nvidia_smi_topo() -> Any:
    return typer.Option(
        None, "--nvidia-smi-topo", metavar="PATH", help="`nvidia-smi topo -m` saved to a file."
    )


def nccl_tests() -> Any:
    return typer.Option(
        [],
        "--nccl-tests",
        metavar="PATH",
        help="nccl-tests all_reduce_perf output (repeatable, per rank count).",
    )


# --- what a run reads and writes -----------------------------------------------------------


def slo() -> Any:
    return typer.Option(None, "--slo", metavar="SLO", help="FILE or ttft_p95=200ms,itl_p95=50ms.")


def out() -> Any:
    return typer.Option(
        None, "--out", metavar="DIR", help="Run directory (default runs/COMMAND-…)."
    )


def force() -> Any:
    return typer.Option(False, "--force", help="Replace what --out holds already.")


def store() -> Any:
    return typer.Option(
        None,
        "--store",
        metavar="DIR",
        callback=folder,
        help="Baseline store folder (default: $INFERTRIAGE_HOME/baselines or the data folder).",
    )


def html() -> Any:
    return typer.Option(
        None,
        "--html",
        metavar="PATH",
        callback=new_file,
        help="Write the run's HTML report to this file (report: default RUN/report.html).",
    )


def export() -> Any:
    return typer.Option(
        [],
        "--export",
        metavar="FORMAT",
        help=(
            "Also write the run as vllm (bench serve --save-result JSON), aiperf "
            "(profile_export_aiperf.json, profile_export.jsonl) or timeline (a Chrome/Perfetto "
            "trace: a track per request), per level, under RUN/exports/; repeatable or a comma "
            "list."
        ),
    )


def markdown() -> Any:
    return typer.Option(
        None, "--markdown", metavar="PATH", callback=new_file, help="Also write Markdown here."
    )


def json_out() -> Any:
    return typer.Option(False, "--json", help="Print one JSON document.")


def progress() -> Any:
    return typer.Option(
        True,
        "--progress/--no-progress",
        help="Live view on stderr (in a terminal only).",
    )


def standard() -> Any:
    return typer.Option(
        None,
        "--standard",
        metavar="mlperf",
        help=(
            "mlperf: MLPerf LoadGen's Server scenario — Poisson at each --rate for 600 s, "
            "its seed, p99 TTFT/TPOT limits of --mlperf-model, its VALID/INVALID summary."
        ),
    )


def mlperf_model() -> Any:
    return typer.Option(
        None,
        "--mlperf-model",
        metavar="MODEL",
        help="With --standard mlperf: whose Server limits (llama2-70b, llama3_1-8b, …).",
    )
