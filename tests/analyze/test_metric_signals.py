"""metrics.jsonl samples → the signals the diagnosis reads, on hand-made series."""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.schemas import Sample


def _hist(t: float, name: str, buckets: dict[str, float], total: float) -> list[Sample]:
    out = [Sample(t, name, count, {"le": le}) for le, count in buckets.items()]
    count = buckets["+Inf"]
    return [
        *out,
        Sample(t, name, total, {"stat": "sum"}),
        Sample(t, name, count, {"stat": "count"}),
    ]


def _by_name(samples: list[Sample], phases: Phases) -> dict[str, float]:
    return {s.name: s.value for s in metric_signals(samples, phases)}


PHASES = Phases(load_start_ts=0.0, load_end_ts=10.0, overload_start_ts=11.0,
                overload_end_ts=15.0, drain_end_ts=18.0)  # fmt: skip


def test_histogram_deltas_over_the_measured_level() -> None:
    samples = [
        *_hist(0.0, "server.ttft", {"0.1": 0, "0.5": 0, "+Inf": 0}, 0.0),
        *_hist(10.0, "server.ttft", {"0.1": 50, "0.5": 100, "+Inf": 100}, 12.0),
        *_hist(15.0, "server.ttft", {"0.1": 50, "0.5": 100, "+Inf": 200}, 500.0),  # overload
    ]
    got = _by_name(samples, PHASES)
    assert got["server.ttft_mean_s"] == pytest.approx(0.12)
    assert got["server.ttft_p50_s"] == pytest.approx(0.1)  # the 50th of 100 is at the 0.1 bound
    assert 0.1 < got["server.ttft_p95_s"] <= 0.5


def test_first_tokens_of_the_levels_first_scrape_interval_count() -> None:
    # a closed loop's first burst is sent at 9.1 s and gets its first tokens by 9.4 s; the
    # scrapes run at 9.0 and 10.0 s: the level's TTFT counts from the one before its start
    phases = Phases(load_start_ts=9.1, load_end_ts=20.0)
    samples = [
        *_hist(9.0, "server.ttft", {"0.1": 0, "0.5": 0, "+Inf": 0}, 0.0),
        *_hist(10.0, "server.ttft", {"0.1": 0, "0.5": 16, "+Inf": 16}, 4.8),  # the burst
        *_hist(20.0, "server.ttft", {"0.1": 8, "0.5": 24, "+Inf": 24}, 5.6),  # 8 more, fast
    ]
    got = _by_name(samples, phases)
    assert got["server.ttft_mean_s"] == pytest.approx(5.6 / 24)  # not 0.8 / 8: the burst kept
    assert got["server.ttft_p50_s"] > 0.1


def test_the_first_bursts_prefill_steps_count_in_the_levels_largest_step() -> None:
    # as its TTFT: the burst's prefill steps ran before the level's first scrape inside it
    phases = Phases(load_start_ts=9.1, load_end_ts=20.0)
    samples = [
        *_hist(9.0, "server.step_tokens", {"16": 0, "2048": 0, "+Inf": 0}, 0.0),
        *_hist(10.0, "server.step_tokens", {"16": 0, "2048": 4, "+Inf": 4}, 8000.0),
        *_hist(20.0, "server.step_tokens", {"16": 100, "2048": 104, "+Inf": 104}, 9000.0),
    ]
    assert _by_name(samples, phases)["server.step_tokens_max"] == 2048


def test_finish_observed_histograms_count_the_scrape_after_the_level() -> None:
    # vLLM observes queue and prefill time at the finish: a slow level's requests all end in
    # its last scrape interval (finished by 9.8 s, scraped at 10.5 s after the overload began)
    phases = Phases(load_start_ts=0.0, load_end_ts=9.8, overload_start_ts=10.0)
    samples = []
    for name, at_end in (("server.prefill_time", 0), ("server.queue_time", 0)):
        samples += _hist(0.0, name, {"1.0": 0, "+Inf": 0}, 0.0)
        samples += _hist(9.5, name, {"1.0": at_end, "+Inf": at_end}, 0.0)
        samples += _hist(10.5, name, {"1.0": 4, "+Inf": 8}, 12.0)
        samples += _hist(12.0, name, {"1.0": 4, "+Inf": 20}, 90.0)  # the overload's
    got = _by_name(samples, phases)
    assert got["server.prefill_time_mean_s"] == pytest.approx(1.5)
    assert got["server.queue_time_mean_s"] == pytest.approx(1.5)


def test_memory_and_queue_read_up_to_the_end_of_overload() -> None:
    samples = [Sample(t, "kv.usage", u) for t, u in ((1, 0.2), (9, 0.5), (13, 0.99), (17, 0.0))]
    samples += [Sample(t, "preemptions", p) for t, p in ((0, 5), (10, 5), (15, 9))]
    samples += [
        Sample(t, "queue.waiting", float(w)) for t, w in ((11, 0), (12, 4), (13, 8), (14, 12))
    ]
    samples += [Sample(17, "queue.running", 0.0)]
    got = _by_name(samples, PHASES)
    assert got["kv.usage_max"] == 0.99
    assert got["preemptions.total"] == 4
    assert got["queue.waiting_slope"] == pytest.approx(4.0)
    assert got["kv.usage_after_drain"] == 0.0


def test_kv_still_held_after_the_drain_is_a_residue() -> None:
    samples = [Sample(16, "kv.usage", 0.3), Sample(17.5, "kv.usage", 0.31)]
    samples += [Sample(17.5, "queue.running", 0.0)]
    assert _by_name(samples, PHASES)["kv.usage_after_drain"] == pytest.approx(0.31)


def test_no_idle_reading_while_requests_still_run() -> None:
    samples = [Sample(17.5, "kv.usage", 0.31), Sample(17.5, "queue.running", 3.0)]
    assert "kv.usage_after_drain" not in _by_name(samples, PHASES)


def test_threads_are_told_apart_by_tid() -> None:
    samples = []
    for t in range(1, 10):
        samples.append(Sample(t, "proc.cpu_thread", 0.98, {"thread": "python", "tid": "1"}))
        samples.append(Sample(t, "proc.cpu_thread", 0.01, {"thread": "python", "tid": "2"}))
        samples.append(Sample(t, "proc.cpu_thread", 0.4, {"thread": "engine-core", "tid": "3"}))
    got = _by_name(samples, PHASES)
    assert got["proc.frontend_thread_cpu"] == pytest.approx(0.98)
    assert got["proc.engine_thread_cpu"] == pytest.approx(0.4)


def _thread(t: float, cpu: float, name: str, pid: str, tid: str, process: str) -> Sample:
    labels = {"thread": name, "pid": pid, "tid": tid, "process": process}
    return Sample(t, "proc.cpu_thread", cpu, labels)


def test_vllm_worker_process_is_not_the_front_end() -> None:
    # Thread names and figures as sampled from vLLM 0.32.0 (CPU build) at concurrency 2:
    # the API server process serves HTTP; EngineCore and Worker are its children.
    samples = []
    for t in range(1, 10):
        samples.append(_thread(t, 0.15, "python", "100", "100", "server"))
        samples.append(_thread(t, 0.62, "VLLM::EngineCor", "200", "200", "child"))
        samples.append(_thread(t, 0.92, "VLLM::Worker", "300", "300", "child"))
        samples.append(_thread(t, 0.02, "python", "300", "301", "child"))
    got = _by_name(samples, PHASES)
    assert got["proc.frontend_thread_cpu"] == pytest.approx(0.15)
    assert got["proc.engine_thread_cpu"] == pytest.approx(0.62)


def test_api_server_cpu_per_streamed_token() -> None:
    # vLLM V1 with `--api-server-count 2`: the root process manages, two VLLM::APIServer_N
    # children serve HTTP and detokenise; their CPU together is the API server's
    samples = []
    for t in range(0, 11):
        samples.append(_thread(t, 0.3, "VLLM::APIServer", "110", "110", "child"))
        samples.append(_thread(t, 0.2, "VLLM::APIServer", "120", "120", "child"))
        samples.append(_thread(t, 0.01, "python", "100", "100", "server"))
        samples.append(_thread(t, 0.62, "VLLM::EngineCor", "200", "200", "child"))
        samples.append(_thread(t, 0.92, "VLLM::Worker_TP0", "300", "300", "child"))
        samples.append(Sample(t, "tokens.generation", 1000.0 * t))  # 1,000 tokens/s
    got = _by_name(samples, PHASES)
    assert got["proc.frontend_cpu"] == pytest.approx(0.51)
    assert got["proc.engine_cpu"] == pytest.approx(0.62)
    assert got["proc.frontend_cpu_per_token_s"] == pytest.approx(0.51 / 1000)
    assert got["proc.frontend_thread_cpu"] == pytest.approx(0.3)
    assert got["proc.engine_apart"] == 1.0  # EngineCore in a process of its own


def test_an_engine_core_thread_in_the_api_servers_process_is_not_apart() -> None:
    # the twin and vLLM V0: the engine loop is a thread of the serving process
    samples = []
    for t in range(0, 11):
        samples.append(_thread(t, 0.4, "python", "100", "100", "server"))
        samples.append(_thread(t, 0.7, "engine-core", "100", "101", "server"))
    got = _by_name(samples, PHASES)
    assert got["proc.engine_apart"] == 0.0
    assert got["proc.frontend_thread_cpu"] == pytest.approx(0.4)


def test_the_samplers_role_sums_count_threads_it_did_not_list() -> None:
    samples = []
    for t in range(0, 11):
        samples.append(_thread(t, 0.99, "VLLM::EngineCor", "200", "200", "child"))
        samples.append(Sample(t, "proc.cpu_role", 0.4, {"role": "frontend"}))
        samples.append(Sample(t, "proc.cpu_role", 0.99, {"role": "engine"}))
        samples.append(Sample(t, "tokens.generation", 2000.0 * t))
    got = _by_name(samples, PHASES)
    assert got["proc.frontend_cpu"] == pytest.approx(0.4)  # no API-server thread listed
    assert got["proc.frontend_cpu_per_token_s"] == pytest.approx(0.2e-3)


def test_sglang_detokenizer_is_the_front_end_and_its_scheduler_the_engine() -> None:
    samples = []
    for t in range(0, 11):
        samples.append(_thread(t, 0.1, "python3", "100", "100", "server"))  # HTTP, tokenizer
        samples.append(_thread(t, 0.4, "sglang::detokenizer", "150", "150", "child"))
        samples.append(_thread(t, 0.9, "sglang::scheduler_TP0", "200", "200", "child"))
    got = _by_name(samples, PHASES)
    assert got["proc.frontend_cpu"] == pytest.approx(0.5)
    assert got["proc.engine_thread_cpu"] == pytest.approx(0.9)
    assert "proc.frontend_cpu_per_token_s" not in got  # no generation counter scraped


def test_one_process_of_like_named_threads_names_no_front_end() -> None:
    # llama-server: HTTP, slots and compute threads share the process and its name.
    samples = [
        _thread(t, 0.99, "llama-server", "7", str(k), "server")
        for t in range(1, 10)
        for k in (7, 8)
    ]
    got = _by_name(samples, PHASES)
    assert "proc.frontend_thread_cpu" not in got and "proc.engine_thread_cpu" not in got


def test_gpu_profiling_fields_absent_is_said() -> None:
    samples = [Sample(t, "gpu.util", 0.9) for t in range(1, 5)]
    got = _by_name(samples, PHASES)
    assert got["gpu.util_mean"] == pytest.approx(0.9)
    assert got["gpu.prof_fields_present"] == 0.0


def test_host_contention_over_the_load() -> None:
    samples = [
        s
        for t in (1.0, 2.0, 3.0, 12.0)  # the last one is in the overload step: not read
        for s in (
            Sample(t, "host.cpu", 0.96 if t < 10 else 0.1),
            Sample(t, "host.cores", 2.0),
            Sample(t, "host.run_queue", 4.0 if t < 10 else 0.0),
            Sample(t, "host.server_local", 1.0),
            Sample(t, "host.client_cpu", 0.8),
            Sample(t, "proc.cpu", 0.9),
            Sample(t, "proc.cpu_wait", 0.3),
        )
    ]
    got = _by_name(samples, PHASES)
    assert got["host.cpu_mean"] == pytest.approx(0.96)
    assert got["host.server_local"] == 1.0 and got["host.cores"] == 2.0
    assert got["host.run_queue_per_core"] == pytest.approx(2.0)
    assert got["proc.cpu_wait_share"] == pytest.approx(0.3 / 1.2)  # wait / (wait + run)
    assert got["host.client_cpu_cores"] == pytest.approx(0.8)
    # 1.92 of 2 cores busy, 0.9 of them the server's: the rest is the client's and others'
    assert got["host.other_cpu_share"] == pytest.approx((0.96 * 2 - 0.9) / 2)
    # a remote server: host figures only, no wait share without the server's process
    remote = [s for s in samples if not s.name.startswith("proc.")]
    assert "proc.cpu_wait_share" not in _by_name(remote, PHASES)
