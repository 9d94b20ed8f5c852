"""The clients of `bench_clients_compare.py`: how each is installed, started and read back.

Each client runs as a command of its own (its own venv, except infertriage and the raw
floor, which use the project's); `command()` gives the argv and environment,
`reported()` reads what the client reported once it exited. Third-party code lives only
in the cache (`--cache`, default `~/.cache/infertriage/bench-clients`), never here.

Run as `python bench_clients_tools.py child infertriage|raw LOAD_JSON OUT_DIR` it is
the child process of the two project-venv clients.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson

DEFAULT_CACHE = Path.home() / ".cache" / "infertriage" / "bench-clients"
BEFORE_ENV = "INFERTRIAGE_BENCH_BEFORE_SRC"  # `--before-src`: the tree client `before` runs
VERSIONS = {"vllm": "0.33.0", "guidellm": "0.8.1", "aiperf": "0.13.0"}
TORCH_CPU = "torch==2.13.0"  # the CPU build pip takes from this machine's disk
VLLM_FILE = "vllm/benchmarks/lib/endpoint_request_func.py"
TOKENIZER_REPO = "local/tok"  # a repo id in the cache's HF layout (AIPerf wants one)
_SNAPSHOT = "0" * 40
_WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "hello")

_TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ["[UNK]", "[BOS]", "[EOS]", "[PAD]", *sys.argv[2].split(",")]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]",
                               eos_token="[EOS]", pad_token="[PAD]")
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(sys.argv[1])
"""

# Drives vLLM's request function as `vllm bench serve --max-concurrency N
# --request-rate inf` does: all requests created at once behind a semaphore, one
# aiohttp session configured as serve.py's make_session, no tqdm bar.
_VLLM_RUNNER = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import aiohttp
from endpoint_request_func import RequestFuncInput, async_request_openai_chat_completions

async def main(url, streams, requests, tokens, out, tag):
    connector = aiohttp.TCPConnector(limit=streams, limit_per_host=streams, ttl_dns_cache=300,
        use_dns_cache=True, keepalive_timeout=60, enable_cleanup_closed=True,
        force_close=False, ssl=False)
    session = aiohttp.ClientSession(connector=connector, trust_env=True,
        timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
    semaphore = asyncio.Semaphore(streams)
    async def one(i):
        inp = RequestFuncInput(prompt="hello " * 16, api_url=url + "/v1/chat/completions",
            prompt_len=16, output_len=tokens, model="test-model", request_id=f"{tag}-{i}")
        async with semaphore:
            return await async_request_openai_chat_completions(inp, session, None)
    outputs = await asyncio.gather(*(one(i) for i in range(requests)))
    await session.close()
    rows = [{"id": f"{tag}-{i}", "success": o.success, "ttft": o.ttft, "itl": o.itl,
             "latency": o.latency, "output_tokens": o.output_tokens, "start": o.start_time,
             "error": o.error[:300]} for i, o in enumerate(outputs)]
    with open(out, "w") as f:
        json.dump(rows, f)

url, streams, requests, tokens, out, tag = sys.argv[2:8]
asyncio.run(main(url, int(streams), int(requests), int(tokens), out, tag))
"""


class Unavailable(Exception):
    """A client that is not installed in the cache (run with --setup)."""


def _venv(cache: Path, client: str) -> Path:
    return cache / f"{client}-{VERSIONS[client]}-venv"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _make_venv(venv: Path, *installs: list[str]) -> None:
    if _python(venv).exists() and (venv / ".ready").exists():
        return
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    for packages in installs:
        subprocess.run([str(_python(venv)), "-m", "pip", "install", "-q", *packages], check=True)
    (venv / ".ready").touch()


def _constraint(cache: Path) -> str:
    path = cache / "torch-cpu.txt"
    path.write_text(TORCH_CPU + "\n")  # never let a dependency pull a CUDA torch
    return str(path)


def _fetch_vllm_file(cache: Path) -> Path:
    """vLLM's request-function file, extracted from the wheel on PyPI into the cache."""
    target = cache / f"vllm-{VERSIONS['vllm']}-lib" / "endpoint_request_func.py"
    if target.exists():
        return target.parent
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                        f"vllm=={VERSIONS['vllm']}"], check=True)  # fmt: skip
        (wheel,) = Path(tmp).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(VLLM_FILE)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target.parent


def _tokenizer(cache: Path, python: Path) -> Path:
    """A word-level tokenizer in an HF-cache layout under cache/hf, for offline use."""
    hf = cache / "hf"
    repo = hf / "hub" / ("models--" + TOKENIZER_REPO.replace("/", "--"))
    snap = repo / "snapshots" / _SNAPSHOT
    if not (snap / "tokenizer.json").exists():
        subprocess.run([str(python), "-c", _TOKENIZER_SCRIPT, str(snap), ",".join(_WORDS)],
                       check=True)  # fmt: skip
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(_SNAPSHOT)
    return hf


def setup(clients: list[str], cache: Path) -> None:
    """Install what the chosen clients need into the cache (several minutes the first time)."""
    cache.mkdir(parents=True, exist_ok=True)
    if "vllm" in clients:
        _fetch_vllm_file(cache)
        _make_venv(_venv(cache, "vllm"), ["aiohttp", "regex", "tqdm"])
    if "guidellm" in clients:
        guidellm = f"guidellm[perf]=={VERSIONS['guidellm']}"
        _make_venv(_venv(cache, "guidellm"), [TORCH_CPU], ["-c", _constraint(cache), guidellm])
        _tokenizer(cache, _python(_venv(cache, "guidellm")))
    if "aiperf" in clients:
        _make_venv(_venv(cache, "aiperf"), ["-c", _constraint(cache),
                                            f"aiperf=={VERSIONS['aiperf']}"])  # fmt: skip
        _tokenizer(cache, _python(_venv(cache, "aiperf")))


def _ready(cache: Path, client: str) -> Path:
    venv = _venv(cache, client)
    if not (venv / ".ready").exists():
        raise Unavailable(f"{venv} is not installed (run with --setup)")
    return _python(venv)


def command(client: str, load: Any, cache: Path, work: Path) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run `client` against `load.url`, writing under `work`."""
    env = dict(os.environ)
    n, r, t = str(load.streams), str(load.requests), str(load.tokens)
    if client == "before":  # infertriage from another tree (`--before-src`), same child
        testing = Path(__file__).resolve().parent.parent / "testing"
        env["PYTHONPATH"] = os.pathsep.join([env[BEFORE_ENV], str(testing)])
        client = "infertriage"
    if client in ("infertriage", "raw"):
        spec = orjson.dumps({"url": load.url, "streams": load.streams, "requests": load.requests,
                             "tokens": load.tokens, "workers": load.workers,
                             "tag": work.name}).decode()  # fmt: skip
        return [sys.executable, str(Path(__file__).resolve()), "child", client, spec,
                str(work)], env  # fmt: skip
    python = _ready(cache, client)
    if client == "vllm":
        lib = cache / f"vllm-{VERSIONS['vllm']}-lib"
        (work / "runner.py").write_text(_VLLM_RUNNER)
        return [str(python), str(work / "runner.py"), str(lib), load.url, n, r, t,
                str(work / "vllm.json"), work.name], env  # fmt: skip
    env |= {"HF_HOME": str(cache / "hf"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    bindir = python.parent
    if client == "guidellm":
        snap = _tokenizer(cache, python) / "hub" / "models--local--tok" / "snapshots" / _SNAPSHOT
        return [str(bindir / "guidellm"), "run",
                "--backend", f"kind=openai_http,target={load.url},model=test-model",
                "--profile", f"kind=concurrent,streams={n}",
                "--constraint", f"kind=max_requests,count={r}",
                "--tokenizer", f"kind=huggingface_auto,model={snap}",
                "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={t}",
                "--output", f"kind=json,path={work / 'guidellm.json'}",
                "--disable-console-interactive"], env  # fmt: skip
    if client == "aiperf":
        return [str(bindir / "aiperf"), "profile", "--model", "test-model", "--url", load.url,
                "--endpoint-type", "chat", "--streaming", "--concurrency", n,
                "--request-count", r, "--synthetic-input-tokens-mean", "16",
                "--output-tokens-mean", t, "--tokenizer", TOKENIZER_REPO,
                "--artifact-dir", str(work / "aiperf"), "--ui-type", "none",
                "--no-server-metrics", "--no-gpu-telemetry"], env  # fmt: skip
    raise ValueError(f"unknown client {client!r}")


def _per_request(
    measured: dict[str, tuple[float, np.ndarray]], writes: dict[str, list[int]]
) -> dict[str, float]:
    """Per-request errors, where ids match: id → (reported TPOT, per-token ITL samples)."""
    tpot_err, itl_err = [], []
    for rid, (tpot, itl) in measured.items():
        truth = np.asarray(writes[rid], dtype=np.int64)
        true_tpot = (truth[-1] - truth[0]) * 1e-9 / (len(truth) - 1)
        tpot_err.append(tpot / true_tpot - 1)
        gaps = np.diff(truth) * 1e-9
        k = min(len(gaps), len(itl))
        itl_err.append(itl[:k] - gaps[:k])
    itl_abs = np.abs(np.concatenate(itl_err))
    return {"tpot_error_max_abs": float(np.max(np.abs(tpot_err))),
            "itl_abs_error_p99_s": float(np.percentile(itl_abs, 99))}  # fmt: skip


def _reported_infertriage(work: Path, writes: dict[str, list[int]]) -> dict[str, Any]:
    from infertriage.analyze.stats.latency import itl_samples, tpot_s  # noqa: PLC0415
    from infertriage.schemas import RequestRecord, RunDir  # noqa: PLC0415

    run = RunDir.open(work / "run")
    measured = {}
    for record in run.iter_records(run.requests, RequestRecord):
        tpot = tpot_s(record)
        if tpot is not None and record.id in writes:
            measured[record.id] = (tpot, np.asarray(itl_samples(record)))
    child = orjson.loads((work / "child.json").read_bytes())
    return {"tpot_s": float(np.mean([m[0] for m in measured.values()])),
            "itl_s": float(np.mean(np.concatenate([m[1] for m in measured.values()]))),
            **_per_request(measured, writes), "own": child}  # fmt: skip


def _reported_vllm(work: Path, writes: dict[str, list[int]]) -> dict[str, Any]:
    rows = [r for r in orjson.loads((work / "vllm.json").read_bytes()) if r["success"]]
    # serve.py: TPOT = (latency − TTFT)/(output_len − 1), output_len from usage; ITL per chunk.
    measured = {r["id"]: ((r["latency"] - r["ttft"]) / (r["output_tokens"] - 1),
                          np.asarray(r["itl"])) for r in rows if r["id"] in writes}  # fmt: skip
    return {"tpot_s": float(np.mean([m[0] for m in measured.values()])),
            "itl_s": float(np.mean(np.concatenate([m[1] for m in measured.values()]))),
            "failed": sum(1 for r in orjson.loads((work / "vllm.json").read_bytes())
                          if not r["success"]),
            **_per_request(measured, writes)}  # fmt: skip


def _reported_guidellm(work: Path) -> dict[str, Any]:
    bench = orjson.loads((work / "guidellm.json").read_bytes())["benchmarks"][0]["metrics"]
    # GuideLLM's "ITL" is (E2E − TTFT)/(N − 1) per request, token-weighted: our TPOT;
    # its "TPOT" is E2E/N (TTFT included). It has no per-chunk gap metric.
    itl = bench["inter_token_latency_ms"]["successful"]["mean"] * 1e-3
    own_tpot = bench["time_per_output_token_ms"]["successful"]["mean"] * 1e-3
    return {"tpot_s": itl, "itl_s": None, "own_tpot_s": own_tpot,
            "requests_ok": bench["request_totals"]["successful"]}  # fmt: skip


def _reported_aiperf(work: Path) -> dict[str, Any]:
    data = orjson.loads((work / "aiperf" / "profile_export_aiperf.json").read_bytes())
    # AIPerf's inter_token_latency is (E2E − TTFT)/(OSL − 1): our TPOT; its
    # inter_chunk_latency is the per-chunk gap (one token per chunk here: our ITL).
    return {"tpot_s": data["inter_token_latency"]["avg"] * 1e-3,
            "itl_s": data["inter_chunk_latency"]["avg"] * 1e-3,
            "requests_ok": data["request_count"]["avg"]}  # fmt: skip


def reported(client: str, work: Path, writes: dict[str, list[int]]) -> dict[str, Any]:
    """What the client itself reported, in seconds, under our definitions."""
    if client in ("infertriage", "before"):
        return _reported_infertriage(work, writes)
    if client == "vllm":
        return _reported_vllm(work, writes)
    if client == "guidellm":
        return _reported_guidellm(work)
    if client == "aiperf":
        return _reported_aiperf(work)
    return {"tpot_s": None, "itl_s": None}


# --- the project-venv children -------------------------------------------------------


def _child_infertriage(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    from infertriage.api.bench import BenchSpec, run_bench  # noqa: PLC0415

    result = run_bench(
        BenchSpec(
            url=spec["url"],
            concurrencies=[spec["streams"]],
            num_requests=spec["requests"],
            workers=spec["workers"],
            workload=f"synthetic:input=16,output={spec['tokens']}",
            out=out / "run",
        )
    )
    client = result.levels[0].client
    return {"cpu_s": client.cpu_s, "wall_s": client.wall_s, "client_bound": client.client_bound,
            "host_busy": client.host_busy, "reasons": list(client.reasons)}  # fmt: skip


async def _raw_load(spec: dict[str, Any]) -> dict[str, Any]:
    import aiohttp  # noqa: PLC0415

    body = orjson.dumps({
        "model": "test-model", "max_tokens": spec["tokens"], "stream": True,
        "messages": [{"role": "user", "content": "hello " * 16}],
        "stream_options": {"include_usage": True},
    })  # fmt: skip
    todo = iter(range(spec["requests"]))
    stamps: list[int] = []

    async def user(session: aiohttp.ClientSession) -> None:
        for i in todo:
            headers = {"Content-Type": "application/json", "X-Request-Id": f"{spec['tag']}-{i}"}
            async with session.post(spec["url"] + "/v1/chat/completions", data=body,
                                    headers=headers) as resp:  # fmt: skip
                async for _ in resp.content.iter_any():
                    stamps.append(time.perf_counter_ns())

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        cpu0 = time.process_time()
        await asyncio.gather(*(user(session) for _ in range(spec["streams"])))
        return {"cpu_s": time.process_time() - cpu0, "reads": len(stamps)}


def _child(argv: list[str]) -> None:
    client, spec, out = argv[0], orjson.loads(argv[1]), Path(argv[2])
    result = _child_infertriage(spec, out) if client == "infertriage" else asyncio.run(
        _raw_load(spec))  # fmt: skip
    (out / "child.json").write_bytes(orjson.dumps(result))


if __name__ == "__main__":
    _child(sys.argv[2:])  # `child CLIENT LOAD_JSON OUT_DIR`
