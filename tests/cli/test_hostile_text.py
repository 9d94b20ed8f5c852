"""Server text is data: hostile names and messages through every command's output.

A loopback server (tests/hostileserver.py) names its model, its errors, its
version and its metric labels with rich markup (`[/x]`, `[bold]`), terminal
escapes (clear screen, window title), `<script>`, a pipe and backticks; a
trace names its kernels so. Every command exits with its normal code, no raw
ESC or BEL byte reaches stdout, stderr or a Markdown file, no `<script>`
reaches Markdown, and every Markdown table row keeps its columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas.text import show_controls

from ..hostileserver import HOSTILE, RAW_CONTROLS, serve_hostile

SMALL = ["--workload", "synthetic:input=8,output=4", "--concurrency", "2"]


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # rich's own styling would put ESC on a forced terminal; the test is about the data's
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "160")


@pytest.fixture
def url() -> Iterator[str]:
    with serve_hostile() as base:
        yield base


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not any(c in stream for c in RAW_CONTROLS), stream
        assert "Traceback" not in stream and "MarkupError" not in stream
    return code, captured.out, captured.err


def _unescaped_pipes(line: str) -> int:
    count, escaped = 0, False
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            count += 1
    return count


def _check_markdown(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    assert not any(c in text for c in RAW_CONTROLS)
    assert "<script>" not in text and "</script>" not in text
    widths: list[int] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            widths.append(_unescaped_pipes(line))
            continue
        assert len(set(widths)) <= 1, f"a table row lost its columns: {widths}"
        widths = []
    return text


def _bench(capsys: pytest.CaptureFixture[str], url: str, out: Path) -> str:
    code, stdout, _ = _run(capsys, "bench", "--url", url, "--num-requests", "8", *SMALL,
                           "--out", str(out))  # fmt: skip
    assert code == 0
    return stdout


def test_bench_shows_the_model_and_errors_as_text(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stdout = _bench(capsys, url, tmp_path / "run")
    assert show_controls("evil[/x][bold]\x1b[2J") in stdout  # the model, as sent, made visible
    assert "[/x]" in stdout and "<script>" in stdout  # text, not markup


def test_metrics_shows_label_values_and_version_as_text(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = _run(capsys, "metrics", url)
    assert code == 0
    assert "Engine:" in stdout and show_controls("\x1b]0;pwn\x07") in stdout


@pytest.mark.slow
def test_validate_markdown_and_terminal(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown = tmp_path / "validate.md"
    code, stdout, _ = _run(capsys, "validate", "--url", url, "--duration", "1s", *SMALL,
                           "--out", str(tmp_path / "run"), "--markdown", str(markdown))  # fmt: skip
    assert code in (0, 1)  # a verdict, never a crash taken for one
    assert "READY" in stdout
    text = _check_markdown(markdown)
    assert "&lt;script&gt;" in text  # the server's error text is quoted, escaped
    kept = (tmp_path / "run" / "validate.json").read_text(encoding="utf-8")
    assert "[/x][bold]\\u001b[2J" in kept  # the data itself is kept as sent


def test_compare_markdown_and_terminal(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, run = tmp_path / "base", tmp_path / "run"
    _bench(capsys, url, base)
    _bench(capsys, url, run)
    markdown = tmp_path / "compare.md"
    code, stdout, _ = _run(capsys, "compare", str(base), str(run), "--markdown", str(markdown))
    assert code == 0 and "Compare" in stdout
    _check_markdown(markdown)


@pytest.mark.slow
def test_diagnose_shows_server_text_as_text(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = _run(capsys, "diagnose", "--url", url, "--duration", "2",
                           "--workload", "synthetic:input=8,output=4",
                           "--out", str(tmp_path / "run"))  # fmt: skip
    assert code == 0 and "Bottleneck map" in stdout


def _hostile_trace(path: Path) -> Path:
    """A minimal PyTorch-profiler trace: launches and kernels, half of them named hostile."""
    events: list[dict[str, object]] = []
    ts = 1000.0
    for i in range(20):
        name = f"void kern_{i % 3}{HOSTILE}<float>" if i % 2 else "ampere_sgemm_128x64_tn"
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": 5,
                "args": {"correlation": i + 1},
            }
        )
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                       "ts": ts + 10, "dur": 40,
                       "args": {"device": 0, "stream": 7, "correlation": i + 1}})  # fmt: skip
        ts += 60
    document = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": f"GPU{HOSTILE}"}],
        "traceEvents": events,
    }
    path.write_text(json.dumps(document))
    return path


def test_trace_shows_kernel_names_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = _hostile_trace(tmp_path / "hostile.pt.trace.json")
    code, stdout, _ = _run(capsys, "trace", str(trace))
    assert code == 0
    assert show_controls(f"kern_1{HOSTILE}")[:40] in stdout
    monkeypatch.setenv("COLUMNS", "80")  # a long name gives way to the figures beside it
    code, stdout, _ = _run(capsys, "trace", str(trace))
    assert code == 0 and "GPU time" in stdout and "120 µs" in stdout
    code, stdout, _ = _run(capsys, "trace", str(trace), "--json")
    assert code == 0 and HOSTILE in json.loads(stdout)["top_kernels"][1]["name"]
