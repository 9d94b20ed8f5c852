"""cli, level 6: takes a command's name; gives the examples its `--help` ends with.

One table, 2-4 real invocations per command (and per `baseline` subcommand), each
one that parses as written (`tests/cli/test_native.py` parses every one, with no
network). Nothing here imports beyond the standard library: the epilogs are built
with the lazily built app, at no start-up cost.
"""

from __future__ import annotations

__all__ = ["EXAMPLES", "epilog"]

# command (`baseline save` for a subcommand) -> (invocation, what it does)
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "diagnose": (
        ("infertriage diagnose --scenario kv-pressure --duration 10s", "the demo, on the twin"),
        (
            "infertriage diagnose --url http://127.0.0.1:8000 --duration 60s --out runs/prod",
            "a live server",
        ),
        ("infertriage diagnose --from-run runs/prod --html prod.html", "re-diagnose a run"),
    ),
    "plan": (
        (
            "infertriage plan --model llama-3.1-8b --gpu H100-SXM --concurrency 16",
            "KV cache and headroom",
        ),
        (
            "infertriage plan --model llama-3.1-70b --gpu H100-SXM --tp 4 --concurrency 32"
            " --what-if tp=4,8",
            "a sweep",
        ),
        (
            "infertriage plan --model llama-3.1-8b --gpu L40S --concurrency 32 --rate 20"
            " --input-len 2000 --output-len 200",
            "size for a rate",
        ),
    ),
    "bench": (
        (
            "infertriage bench --url http://127.0.0.1:8000 --concurrency 1,8 --duration 30s",
            "closed loop, two levels",
        ),
        (
            "infertriage bench --url http://127.0.0.1:8000/v1 --rate 2,4,inf --num-requests 200",
            "open loop",
        ),
        (
            "OPENAI_BASE_URL=http://127.0.0.1:8000/v1 infertriage bench --sweep --duration 1m",
            "the URL from the environment",
        ),
        (
            "infertriage bench --url http://127.0.0.1:8000 --find-max-rate --goodput ttft=200ms",
            "the largest rate whose SLO holds",
        ),
    ),
    "trace": (
        ("infertriage trace trace.json.gz", "one profiler trace"),
        ("infertriage trace traces/ --log recompiles.log --json", "a directory of ranks"),
    ),
    "logs": (
        ("infertriage logs vllm.log", "the timeline and the map"),
        ("infertriage logs vllm.log vllm.log.1.gz --since 14:01:00 --interval 30s", "a window"),
    ),
    "metrics": (
        ("infertriage metrics http://127.0.0.1:8000", "one scrape"),
        ("infertriage metrics http://127.0.0.1:8000 --duration 30s --json", "rates, quantiles"),
        (
            'infertriage metrics --prometheus http://prometheus:9090 --selector job="vllm"',
            "a fleet",
        ),
    ),
    "simulate": (
        ("infertriage simulate --scenario kv-pressure --rate 8", "a load on a virtual clock"),
        ("infertriage simulate --stage 4:10m --stage 20:2m --json", "stages back to back"),
    ),
    "twin": (
        ("infertriage twin", "the healthy twin on 127.0.0.1:8000"),
        ("infertriage twin --scenario kv-pressure --port 0 --load-time 5s", "a bottleneck"),
    ),
    "validate": (
        ("infertriage validate --rate 4 --duration 20s --soak 30s", "on the twin"),
        (
            "infertriage validate --url http://127.0.0.1:8000 --slo ttft_p95=200ms,itl_p95=50ms",
            "a live server",
        ),
        (
            "infertriage validate --url http://127.0.0.1:8000 --markdown golive.md --json",
            "a checklist file",
        ),
    ),
    "report": (
        ("infertriage report runs/prod", "RUN/report.html"),
        ("infertriage report runs/prod --html prod.html", "elsewhere"),
    ),
    "topology": (
        (
            "infertriage topology --model llama-3.1-70b --gpu H100-SXM --nvidia-smi-topo topo.txt",
            "the measured links",
        ),
        (
            "infertriage topology --model llama-3.1-70b --gpu H100-SXM --nccl-tests ar8.txt --json",
            "nccl-tests output",
        ),
    ),
    "monitor-config": (
        ("infertriage monitor-config --engine vllm --out monitoring", "rules and a dashboard"),
        (
            "infertriage monitor-config --engine sglang --out monitoring --from-run runs/prod",
            "thresholds from a run",
        ),
    ),
    "compare": (
        ("infertriage compare prod-v1 runs/today --fail-on-regression", "against a baseline"),
        (
            "infertriage compare --url http://a:8000 --url http://b:8000 --concurrency 4",
            "A/B two servers",
        ),
    ),
    "baseline": (
        ("infertriage baseline save prod-v1 runs/prod", "save a run"),
        ("infertriage baseline list --json", "list them"),
    ),
    "baseline save": (
        ("infertriage baseline save prod-v1 runs/prod", "save a run"),
        ("infertriage baseline save prod-v1 runs/today --force", "replace it"),
    ),
    "baseline list": (
        ("infertriage baseline list", "a table"),
        ("infertriage baseline list --store baselines --json", "another store, as JSON"),
    ),
    "baseline delete": (
        ("infertriage baseline delete prod-v1", "delete one"),
        ("infertriage baseline delete prod-v1 --store baselines", "from another store"),
    ),
}


def epilog(command: str) -> str:
    """The `Examples:` block of a command's `--help`: one invocation a line."""
    lines = [f"  # {what}\n  {invocation}" for invocation, what in EXAMPLES[command]]
    return "\n".join(["Examples:", *lines])
