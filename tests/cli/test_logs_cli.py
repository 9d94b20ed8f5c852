"""`infertriage logs`: the sample logs end to end, --json as one document, bad input as exit 2.

The samples under tests/data/logs are written by tests/data/logs/make_samples.py (vLLM 0.10.1
V1 and SGLang 0.4.6 formats; see its docstring).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from infertriage.cli import main

DATA = Path(__file__).parents[1] / "data" / "logs"
INCIDENT = DATA / "vllm_v1_incident.log"
STUCK = DATA / "vllm_v1_stuck.log.gz"
QUEUE = DATA / "sglang_queue.log"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["logs", *args, "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert isinstance(document, dict) and document["schema"] == "infertriage.logs/v1"
    return document


def _findings(document: dict[str, object]) -> dict[str, str]:
    diagnosis = document["diagnosis"]
    assert isinstance(diagnosis, dict)
    return {f["id"]: f["status"] for layer in diagnosis["layers"] for f in layer["findings"]}


def _primary(document: dict[str, object]) -> str | None:
    diagnosis = document["diagnosis"]
    assert isinstance(diagnosis, dict)
    return None if diagnosis["primary"] is None else str(diagnosis["primary"]["finding"])


def test_kv_full_queue_then_oom_is_memory(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, str(INCIDENT))
    assert doc["engine"] == "vllm" and doc["interval_s"] == 10.0 and doc["oom_errors"] == 1
    timeline = doc["timeline"]
    assert isinstance(timeline, list) and len(timeline) == 23
    assert timeline[-1]["waiting"] == 59 and timeline[-1]["oom_errors"] == 1
    # the glued record (14:02:00) and the coloured one (14:00:50) are both read
    assert {row["start"][-8:] for row in timeline} >= {"14:00:50", "14:02:00"}
    assert _primary(doc) == "memory.out_of_memory"
    # no latency measured: the queue persisting in the log is the symptom it explains
    assert _findings(doc)["memory.kv_pressure"] == "bottleneck"
    spec = doc["spec"]
    assert isinstance(spec, dict) and spec["per_position"] == [0.781, 0.532, 0.329]


def test_stuck_engine_from_a_gzip(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, str(STUCK))
    assert doc["stalls"] == [
        {"start": doc["stalls"][0]["start"], "end": doc["stalls"][0]["end"],  # type: ignore[index]
         "duration_s": 230.0, "running": 12.0}
    ]  # fmt: skip
    assert _primary(doc) == "scheduling.engine_stuck"


def test_sglang_queue_with_room_in_the_cache_is_not_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _json(capsys, str(QUEUE))
    assert doc["engine"] == "sglang"
    found = _findings(doc)
    assert "memory.kv_pressure" not in found and found["scheduling.unbounded_queue"] == "warning"
    layers = {x["layer"]: x["status"] for x in doc["diagnosis"]["layers"]}  # type: ignore[index]
    assert layers["memory"] == "ok"


def test_screen_shows_the_timeline_stall_and_map(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", str(STUCK)]) == 0
    out = capsys.readouterr().out
    for needle in ("Timeline (10 s per row", "09:13:30", "stalled", "Stalled: 09:13:30–09:17:20",
                   "Bottleneck map (from the log)", "scheduling.engine_stuck",
                   "log.engine_stuck_s 230 s (limit 60 s)"):  # fmt: skip
        assert needle in out, needle


def test_window_interval_and_several_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json(capsys, str(INCIDENT), "--since", "14:01:30", "--until", "14:02:05")
    assert [row["start"][-8:] for row in doc["timeline"]] == [  # type: ignore[attr-defined]
        "14:01:30", "14:01:40", "14:01:50", "14:02:00"
    ]  # fmt: skip
    # the OOM lies after the window; the full cache with dozens waiting is within it
    assert _primary(doc) == "memory.kv_pressure"
    doc = _json(capsys, str(INCIDENT), "--interval", "1m")
    assert doc["interval_s"] == 60.0 and len(doc["timeline"]) == 4  # type: ignore[arg-type]
    # two rotated parts, given newest first: one stream in time order
    lines = INCIDENT.read_text().splitlines(keepends=True)
    (tmp_path / "a.log").write_text("".join(lines[30:]))
    with gzip.open(tmp_path / "a.log.1.gz", "wt") as part:
        part.write("".join(lines[:30]))
    doc = _json(capsys, str(tmp_path / "a.log"), str(tmp_path / "a.log.1.gz"))
    assert len(doc["timeline"]) == 23 and doc["oom_errors"] == 1  # type: ignore[arg-type]


def test_a_cut_gzip_keeps_what_came_before_the_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = gzip.compress(INCIDENT.read_bytes() * 20)
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    doc = _json(capsys, str(cut))
    notes = doc["notes"]
    assert isinstance(notes, list) and "cut short" in notes[0]
    assert doc["timeline"]


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["logs", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    return lines[0]


def test_bad_input_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "does not exist" in _error(capsys, str(tmp_path / "missing.log"))
    (tmp_path / "empty.log").write_text("")
    assert "is empty" in _error(capsys, str(tmp_path / "empty.log"))
    garbage = tmp_path / "core.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    line = _error(capsys, str(garbage))
    assert "has no line infertriage reads" in line and "vLLM stats lines" in line
    assert "SGLang `Decode batch`" in line
    line = _error(capsys, str(INCIDENT), "--engine", "sglang")
    assert "SGLang" in line and "vLLM" not in line.split("expects")[1]
    assert "--engine must be one of vllm, llamacpp, sglang" in _error(
        capsys, str(INCIDENT), "--engine", "nope"
    )
    assert "is not a time" in _error(capsys, str(INCIDENT), "--since", "yesterday")
    line = _error(capsys, str(INCIDENT), "--since", "14:02", "--until", "14:01")
    assert "--until 14:01 is before --since 14:02" in line
    assert "lies between --since and --until" in _error(
        capsys, str(INCIDENT), "--since", "23:00", "--until", "23:30"
    )
    fake = tmp_path / "plain.log.gz"
    shutil.copy(INCIDENT, fake)
    assert "is not a gzip file" in _error(capsys, str(fake))
    whole = gzip.compress(INCIDENT.read_bytes())
    (tmp_path / "stub.log.gz").write_bytes(whole[:12])
    assert "is empty before its gzip is cut" in _error(capsys, str(tmp_path / "stub.log.gz"))


def test_the_samples_are_what_their_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_samples", DATA / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert INCIDENT.read_text() == module.incident()
    assert QUEUE.read_text() == module.sglang()
    assert gzip.decompress(STUCK.read_bytes()).decode() == module.stuck()


def test_a_file_name_is_shown_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = tmp_path / "a\x1b[2Jb.log"
    shutil.copy(QUEUE, hostile)
    assert main(["logs", str(hostile)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "Log triage:" in out


def test_until_past_midnight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = (
        "[2026-12-{d} {t} TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.10, "
        "cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0"
    )
    stamps = [("02", "23:58:00"), ("02", "23:59:00"), ("03", "00:00:30"), ("03", "00:02:00")]
    log = tmp_path / "night.log"
    log.write_text("\n".join(line.format(d=d, t=t) for d, t in stamps) + "\n")
    doc = _json(capsys, str(log), "--since", "23:59", "--until", "00:01")
    assert [row["start"][-8:] for row in doc["timeline"]] == ["23:59:00", "00:00:30"]  # type: ignore[attr-defined]


# --- partial input, as operators paste it (lines in vLLM 0.10.1 V1 and SGLang 0.4.6 formats,
# figures chosen here) ---

_V1_LINE = (
    "INFO 12-02 14:01:30 [loggers.py:123] Engine 000: Avg prompt throughput: 812.3 tokens/s, "
    "Avg generation throughput: 95.0 tokens/s, Running: 64 reqs, Waiting: {w} reqs, "
    "GPU KV cache usage: 99.1%, Prefix cache hit rate: 12.5%"
)
_SGL_UNSTAMPED = (
    "Decode batch. #running-req: 64, #token: 90000, token usage: 0.98, cuda graph: True, "
    "gen throughput (token/s): 455.10, #queue-req: {w}"
)


def test_one_pasted_line_is_a_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.log"
    one.write_text(_V1_LINE.format(w=41))  # no newline: a single line is read as it is
    doc = _json(capsys, str(one))
    assert doc["engine"] == "vllm"
    # no client measured TTFT: 41 requests waiting on a full cache is itself the symptom
    assert _primary(doc) == "memory.kv_pressure"


def test_lines_without_stamps_are_a_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "sglang.txt"
    log.write_text("".join(_SGL_UNSTAMPED.format(w=w) + "\n" for w in (30, 35, 41)))
    doc = _json(capsys, str(log))
    assert doc["engine"] == "sglang"
    assert any("read as a snapshot" in note for note in doc["notes"])  # type: ignore[union-attr]
    assert _primary(doc) == "memory.kv_pressure"


def test_a_cut_last_line_and_foreign_lines_are_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "cut.log"
    # the last line has no newline: cut mid-write, in the middle of its KV figure ("9" of 99.1 %)
    lines = [_V1_LINE.format(w=0), "some other program's line", _V1_LINE.format(w=2)[:186]]
    log.write_text("\n".join(lines))
    doc = _json(capsys, str(log))
    notes = " ".join(doc["notes"])  # type: ignore[arg-type]
    assert "its last line has no newline and may be cut: its figures were left out" in notes
    assert "1 of 3 lines not recognised" in notes
    assert [row["waiting"] for row in doc["timeline"]] == [0]  # type: ignore[attr-defined]
    oom = tmp_path / "oom.log"  # what a cut line says happened stands: here, an OOM
    oom.write_text(_V1_LINE.format(w=0) + "\ntorch.OutOfMemoryError: CUDA out of memory.")
    assert _primary(_json(capsys, str(oom))) == "memory.out_of_memory"


def test_a_healthy_snapshot_has_no_bottleneck(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "calm.txt"
    calm = _SGL_UNSTAMPED.replace("token usage: 0.98", "token usage: 0.30")
    log.write_text("".join(calm.format(w=w) + "\n" for w in (0, 1, 0, 0)))
    assert _primary(_json(capsys, str(log))) is None


def test_data_parallel_engines_are_kept_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM V1 with --data-parallel-size 2 (0.10 `loggers.py`, one line per engine): engine
    0 queues while engine 1 idles — summed, the server would look merely busy."""
    busy = _V1_LINE.replace("GPU KV cache usage: 99.1%", "GPU KV cache usage: 60.0%")
    idle = (
        "INFO 12-02 14:01:{s} [loggers.py:123] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 40.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%"
    )
    lines = [
        line
        for s in (30, 40, 50)
        for line in (busy.replace("14:01:30", f"14:01:{s}").format(w=20), idle.format(s=s))
    ]
    log = tmp_path / "dp.log"
    log.write_text("\n".join(lines) + "\n")
    doc = _json(capsys, str(log))
    assert _findings(doc).get("parallelism.dp_rank_imbalance") == "bottleneck"
    assert _primary(doc) == "parallelism.dp_rank_imbalance"


def test_a_kv_use_above_100_percent_is_the_log_being_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "over.txt"
    over = _SGL_UNSTAMPED.replace("token usage: 0.98", "token usage: 1.37")
    log.write_text("".join(over.format(w=0) + "\n" for _ in range(3)))
    doc = _json(capsys, str(log))
    assert _primary(doc) is None  # never a full cache: the figure cannot be true
    assert _findings(doc)["evidence.metric_artefact"] == "warning"


def test_records_written_twice_are_the_logger_not_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM 0.2.1's logger wrote every record twice (vllm-project/vllm#1494, fixed by #1524);
    two TP workers' identical lines under their own process prefixes are not duplicates."""
    log = tmp_path / "twice.log"
    line = "INFO 10-31 15:40:52 llm_engine.py:207] # GPU blocks: 127960, # CPU blocks: 7281"
    log.write_text(f"{line}\n{line}\n")
    doc = _json(capsys, str(log))
    assert _primary(doc) is None and "evidence.metric_artefact" in _findings(doc)
    workers = tmp_path / "workers.log"
    lmcache = (
        "[2025-07-21 22:01:18,147] LMCache INFO: Retrieved 84 out of 84 out of total 15444 tokens"
    )
    workers.write_text(
        f"(VllmWorker rank=1 pid=3832931) {lmcache}\n(VllmWorker rank=0 pid=3832930) {lmcache}\n"
    )
    assert "evidence.metric_artefact" not in _findings(_json(capsys, str(workers)))


def test_the_servers_own_metric_errors_are_artefacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prometheus_client refusing a negative increment (vllm-project/vllm#10430's traceback)."""
    log = tmp_path / "negative.log"
    log.write_text(
        "ERROR 11-15 03:59:17 engine.py:165] ValueError('Error in model execution: Counters can "
        "only be incremented by non-negative amounts.')\n"
    )
    doc = _json(capsys, str(log))
    assert _primary(doc) is None
    assert _findings(doc)["evidence.metric_artefact"] == "warning"


# --- healthy logs stay healthy: what a review found read as bottlenecks (formats: vLLM 0.10
# V1 loggers.py, V0 metrics.py, SGLang 0.3 scheduler.py, llama-server 2025; figures chosen) ---

_CALM = (
    "INFO 06-01 10:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 800.0 "
    "tokens/s, Avg generation throughput: 600.0 tokens/s, Running: 20 reqs, Waiting: {w} reqs, "
    "GPU KV cache usage: 40.0%, Prefix cache hit rate: 30.0%"
)


def _calm(waiting: dict[int, int] | None = None) -> list[str]:
    """Five minutes of a calm vLLM V1 server, a line every 10 s (`waiting`: line → queue)."""
    return [_CALM.format(m=i // 6, s=10 * (i % 6), w=(waiting or {}).get(i, 0)) for i in range(30)]


HEALTHY_LOGS = {
    # users pressing stop now and then: three aborts a minute apart
    "spread_aborts": _calm()
    + [
        f"INFO 06-01 10:0{m}:05 [async_llm.py:400] Aborted request chatcmpl-{m}." for m in (1, 2, 3)
    ],
    # configuration that names timeouts and error handling, not a failure
    "innocent_words": [
        "INFO 06-01 09:59:00 [nixl_connector.py:400] Setting KV transfer timeout to 120 s",
        "INFO 06-01 09:59:01 [config.py:100] NCCL error handling enabled",
        *_calm(),
    ],
    # one stats line of five waiting in five minutes
    "one_burst": _calm({12: 5}),
    # SGLang 0.3's retraction is an INFO line: requests put back, not an OOM
    "sglang_retraction": [
        f"[2024-08-01 10:00:0{s} TP0] Decode batch. #running-req: 30, #token: 9000, token usage: "
        f"0.90, gen throughput (token/s): 1500.00, #queue-req: 0"
        for s in range(0, 10, 2)
    ]
    + [
        "[2024-08-01 10:00:09 TP0] Decode out of memory happened. #retracted_reqs: 1, "
        "#new_token_ratio: 0.4000 -> 0.5000"
    ],
    # V1 with one long prompt: prompt-only lines alternate with generating ones by nature
    "v1_long_prompt": [
        _CALM.format(m=0, s=10 * i, w=0)
        .replace("Running: 20", "Running: 1")
        .replace("600.0 tokens/s, Running", f"{0.0 if i % 2 == 0 else 30.0} tokens/s, Running")
        for i in range(6)
    ],
    # a health checker polling llama-server: the same access line, again and again
    "llama_health_checks": [
        "srv  update_slots: all slots are idle",
        *["srv  log_server_r: request: GET /health 127.0.0.1 200"] * 5,
    ],
}


@pytest.mark.parametrize("name", sorted(HEALTHY_LOGS))
def test_a_healthy_log_has_no_bottleneck_and_no_artefact(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / f"{name}.log"
    log.write_text("\n".join(HEALTHY_LOGS[name]) + "\n")
    doc = _json(capsys, str(log))
    assert _primary(doc) is None, _findings(doc)
    assert "evidence.metric_artefact" not in _findings(doc)
    assert all(status != "bottleneck" for status in _findings(doc).values()), _findings(doc)


def test_a_log_with_and_one_without_stamps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file without stamps has no place on the other's timeline: it is left out, noted."""
    (tmp_path / "dated.log").write_text("\n".join(_calm()) + "\n")
    (tmp_path / "pasted.txt").write_text(
        "Decode batch. #running-req: 3, #token: 900, token usage: 0.10, gen throughput "
        "(token/s): 0.00, #queue-req: 0\n"
    )
    doc = _json(capsys, str(tmp_path / "pasted.txt"), str(tmp_path / "dated.log"))
    assert _primary(doc) is None
    assert "1 lines of files without a timestamp were left out" in doc["notes"]  # type: ignore[operator]


def test_a_window_on_a_log_without_stamps_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "snapshot.txt"
    log.write_text(_SGL_UNSTAMPED.format(w=3) + "\n")
    line = _error(capsys, str(log), "--since", "14:00")
    assert "--since and --until need timestamps" in line
