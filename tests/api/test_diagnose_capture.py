"""diagnose --url with --profile/--profile-dir and --log, against a twin served as any server.

The twin runs as its own process with a profile folder, as vLLM runs with
VLLM_TORCH_PROFILER_DIR: `--profile 1 --profile-dir D` must ask it for a
trace over part of the measured level and copy the trace it wrote into the
run. The server log is a file that a thread here appends to while the run
goes on, in vLLM V1's stats-line format, stamped with the current time, plus
one CUDA OOM line; an OOM line stamped an hour before the run is in the file
too and must be left out. A twin without a profile folder refuses
/start_profile: the run goes on and says so.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.api.capture import read_log
from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.cli import main
from infertriage.schemas import Layer, RunDir, UserError
from infertriage.twin.process import TwinProcess

from ..workloads import SHORT_OUTPUTS

pytestmark = pytest.mark.slow


def _stamp(at: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(at))


def _stats_line(at: float) -> str:
    return (
        f"(APIServer pid=7) INFO {_stamp(at)} [loggers.py:123] Engine 000: Avg prompt throughput: "
        "900.0 tokens/s, Avg generation throughput: 120.0 tokens/s, Running: 9 reqs, "
        "Waiting: 3 reqs, GPU KV cache usage: 42.0%, Prefix cache hit rate: 0.0%"
    )


class _LogWriter:
    """Appends a stats line every 0.5 s, and one OOM line, to `path` until stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        hour_ago = _stamp(time.time() - 3600)
        path.write_text(
            f"ERROR {hour_ago} [core.py:1] torch.OutOfMemoryError: CUDA out of memory\n"
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        count = 0
        while not self._stop.wait(0.5):
            now = time.time()
            lines = [_stats_line(now)]
            if count == 3:
                lines.append(f"ERROR {_stamp(now)} [core.py:9] CUDA out of memory. Tried 2 GiB")
            with self.path.open("a") as log:
                log.write("\n".join(lines) + "\n")
            count += 1

    def __enter__(self) -> _LogWriter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def profiled_twin(tmp_path: Path) -> Iterator[tuple[TwinProcess, Path]]:
    folder = tmp_path / "profiles"
    folder.mkdir()
    with TwinProcess("healthy", load_time_s=0.2, profile_dir=folder) as twin:
        yield twin, folder


def test_a_profile_and_the_servers_log_join_the_evidence(
    profiled_twin: tuple[TwinProcess, Path], tmp_path: Path
) -> None:
    twin, folder = profiled_twin
    log, out = tmp_path / "server.log", tmp_path / "run"
    with _LogWriter(log):
        result = diagnose(
            DiagnoseSpec(
                url=twin.url,
                dcgm_url=f"{twin.url}/dcgm/metrics",
                server_pid=twin.pid,
                duration_s=6.0,
                concurrency=8,
                workload=SHORT_OUTPUTS,  # the capture is under test, not the default mix
                out=out,
                profile_s=1.0,
                profile_dir=folder,
                logs=[log],
            )
        )
    # nothing to say of the capture (a drain that settled may say what it cut)
    cut = " requests of the measured level were still streaming "
    assert [note for note in result.notes if cut not in note] == []
    traces = list((out / "raw" / "traces").glob("profile-00-*.pt.trace.json.gz"))
    assert traces, "the server's profile was not copied into the run"
    run = RunDir.open(out)
    signals = {s["name"]: s for s in map(json.loads, run.signals.read_text().splitlines())}
    assert signals["trace.gpu_span_s"]["value"] > 0
    # the log's OOM during the run counts; the one an hour before does not
    assert signals["log.oom_errors"]["value"] == 1
    memory = result.diagnosis.layer(Layer.MEMORY)
    assert any(f.id == "memory.out_of_memory" for f in memory.findings)
    # the scraped KV use wins over the log's 42 %
    assert signals["kv.usage_max"]["source"] == "metrics"
    assert list((out / "raw" / "logs").iterdir())
    assert diagnose(DiagnoseSpec(from_run=out)).diagnosis == result.diagnosis


def test_a_server_that_refuses_to_profile_is_still_diagnosed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with TwinProcess("healthy", load_time_s=0.2) as twin:
        args = ["diagnose", "--url", twin.url, "--duration", "4", "--concurrency", "4",
                "--workload", SHORT_OUTPUTS]  # fmt: skip
        code = main([*args, "--profile", "1", "--out", str(tmp_path / "run"), "--json"])
    assert code == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == "infertriage.diagnosis/v1"
    assert "refused /start_profile (HTTP 404)" in captured.err


def test_a_log_that_gives_no_evidence_is_a_note_and_the_run_stands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read once the load is over: refusing it then would lose the load's measurements."""
    log = tmp_path / "server.log"
    log.write_bytes(b"\x00" * 65536)  # what logrotate's copytruncate leaves, and no line
    out = tmp_path / "run"
    with TwinProcess("healthy", load_time_s=0.2) as twin:
        args = ["diagnose", "--url", twin.url, "--duration", "3", "--concurrency", "4",
                "--workload", SHORT_OUTPUTS, "--log", str(log)]  # fmt: skip
        code = main([*args, "--out", str(out), "--json"])
    assert code == 0
    captured = capsys.readouterr()
    note = f"note: --log {log} has no line infertriage reads: it gave the map no evidence"
    assert note in captured.err.splitlines()
    assert json.loads(captured.out)["schema"] == "infertriage.diagnosis/v1"
    assert (out / "diagnosis.json").is_file()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--log", "/nonexistent/server.log"], "--log /nonexistent/server.log does not exist."),
        (["--profile", "1", "--profile-dir", "/nonexistent"], "is not a folder"),
        (["--profile", "0"], "--profile must be a positive number"),
        (["--prometheus", "nope", "--selector", 'job="x"'], "is not an http"),
        (["--prometheus", "http://127.0.0.1:9", "--selector", 'job="x"'], "connection refused"),
        (["--prometheus", "http://127.0.0.1:9"], "--prometheus needs --selector"),
    ],
)
def test_bad_capture_flags_fail_before_any_load(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(["diagnose", "--url", "http://127.0.0.1:9", *flags, "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not out.exists()


def test_a_cut_gzip_log_is_one_clear_error(tmp_path: Path) -> None:
    whole = gzip.compress(("INFO 12-02 16:31:20 [loggers.py:1] Engine 000: …\n" * 200).encode())
    cut = tmp_path / "server.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(UserError, match="is not a whole gzip file"):
        read_log(cut)
    plain = tmp_path / "server.log"
    plain.write_bytes(b"\xff\xfe binary \x00 junk\n")
    assert "junk" in read_log(plain)  # undecodable bytes are replaced, not fatal
