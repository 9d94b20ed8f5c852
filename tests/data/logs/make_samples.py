"""Write the sample server logs of `infertriage logs` (run from the repository root).

`python tests/data/logs/make_samples.py` rewrites, deterministically:

- `vllm_v1_incident.log`: vLLM 0.10 (V1 engine, `Engine 000:` stats lines every 10 s with the
  `(APIServer pid=N)` prefix, `SpecDecoding metrics` lines of an EAGLE drafter with three
  draft positions). Load rises at 14:00; from 14:01:30 the KV cache is 97–100 % full and
  requests queue (up to 58); at 14:03:52 the engine core dies of a CUDA out-of-memory error
  (its traceback as vLLM prints it). Messy on purpose: ANSI colour on some records, one
  stats record glued to the record before it, an undated traceback.
- `vllm_v1_stuck.log.gz`: vLLM 0.10, gzip. Healthy until 09:12:40, then one stats line with
  12 requests running and 0.0 tokens/s generated, then only the API server's access lines
  for four minutes (vLLM logs an idle interval at DEBUG): a stuck engine.
- `sglang_queue.log`: SGLang 0.4.6 (`[YYYY-MM-DD HH:MM:SS TP0] Decode batch, …` and
  `Prefill batch. …`): a queue of up to 90 requests while the KV pool is at most 41 % used.

The figures are invented; the formats are those of the named versions' loggers.
"""

from __future__ import annotations

import gzip
from pathlib import Path

HERE = Path(__file__).parent
_V1 = (
    "(APIServer pid=2917) INFO 12-02 {t} [loggers.py:123] Engine 000: Avg prompt throughput: "
    "{p:.1f} tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, "
    "Waiting: {w} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {hit:.1f}%"
)
_SPEC = (
    "(APIServer pid=2917) INFO 12-02 {t} [metrics.py:96] SpecDecoding metrics: Mean acceptance "
    "length: {mal:.2f}, Accepted throughput: {at:.2f} tokens/s, Drafted throughput: {dt:.2f} "
    "tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: "
    "{pos}, Avg Draft acceptance rate: {rate:.1f}%"
)
_ACCESS = (
    '(APIServer pid=2917) INFO 12-02 {t} [launcher.py:80] 10.0.3.17:52144 - "POST '
    '/v1/chat/completions HTTP/1.1" 200 OK'
)


def _clock(seconds: int, hour: int = 14) -> str:
    return f"{hour + seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def incident() -> str:
    lines = [
        "(APIServer pid=2917) INFO 12-02 13:59:41 [api_server.py:1805] vLLM API server "
        "version 0.10.1.1",
        "(EngineCore_0 pid=3104) INFO 12-02 13:59:58 [gpu_worker.py:276] Available KV cache "
        "memory: 18.53 GiB",
    ]
    for step in range(1, 24):
        t = _clock(step * 10)
        running = min(256, 20 * step)
        kv = min(100.0, 11.0 * step if step < 9 else 97.0 + (step % 3))
        waiting = 0 if step < 9 else 4 * (step - 8) - (step % 2)
        gen = 900.0 + 160 * min(step, 9) if step < 9 else 2100.0 - 20 * (step - 9)
        stats = _V1.format(t=t, p=3100.0 - 40 * step, g=gen, r=running, w=waiting, kv=kv,
                           hit=31.0 + step / 4)  # fmt: skip
        if step == 5:
            stats = f"\x1b[32m{stats}\x1b[0m"  # colour, as a TTY handler writes it
        if step == 12:  # two writers, one newline lost
            stats = _ACCESS.format(t=t) + stats
        lines.append(stats)
        a, d = 1480 + 11 * step, 2700 + 9 * step
        lines.append(
            _SPEC.format(
                t=t,
                mal=1 + 3 * a / d,
                at=a / 10,
                dt=d / 10,
                a=a,
                d=d,
                pos="0.781, 0.532, 0.329",
                rate=100 * a / d,
            )
        )
    lines += [
        "(EngineCore_0 pid=3104) \x1b[31mERROR\x1b[0m 12-02 14:03:52 [core.py:700] EngineCore "
        "encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, '
        "in run_engine_core",
        "    engine_core.run_busy_loop()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.12 GiB is free.",
        "(APIServer pid=2917) ERROR 12-02 14:03:53 [async_llm.py:416] AsyncLLM output_handler "
        "failed.",
    ]
    return "\n".join(lines) + "\n"


def stuck() -> str:
    lines = []
    for step in range(1, 9):
        t = _clock(step * 10 + 12 * 60, hour=9)
        lines.append(_V1.format(t=t, p=850.0, g=1210.0 + step, r=12, w=0, kv=14.0, hit=40.0))
        lines.append(_ACCESS.format(t=t))
    lines.append(_V1.format(t="09:13:30", p=0.0, g=0.0, r=12, w=3, kv=14.2, hit=40.0))
    for second in range(0, 240, 20):  # the API server still answers /health and queues
        lines.append(
            _ACCESS.format(t=_clock(13 * 60 + 40 + second, hour=9)).replace(
                "POST /v1/chat/completions", "GET /health"
            )
        )
    return "\n".join(lines) + "\n"


def sglang() -> str:
    lines = []
    for step in range(1, 19):
        t = f"2026-12-02 11:20:{step * 3:02d}"
        queue = 0 if step < 4 else min(90, 8 * (step - 3))
        lines.append(
            f"[{t} TP0] Prefill batch. #new-seq: 2, #new-token: 4096, #cached-token: 512, "
            f"token usage: {0.2 + step / 100:.2f}, #running-req: 32, #queue-req: {queue}"
        )
        lines.append(
            f"[{t} TP0] Decode batch, #running-req: 32, #token: {9000 + 500 * step}, token "
            f"usage: {0.22 + step / 100:.2f}, cuda graph: True, gen throughput (token/s): "
            f"{1510.0 - 3 * step:.2f}, #queue-req: {queue}"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    (HERE / "vllm_v1_incident.log").write_text(incident())
    with gzip.GzipFile(HERE / "vllm_v1_stuck.log.gz", "wb", mtime=0) as stream:
        stream.write(stuck().encode())
    (HERE / "sglang_queue.log").write_text(sglang())


if __name__ == "__main__":
    main()
