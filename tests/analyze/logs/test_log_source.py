"""A log file is read as a stream of lines at a bounded cost: a gzip bomb or a log past
`MAX_LOG_BYTES` is one sentence before a line is parsed, a line past `MAX_LINE_BYTES` is
read up to there, and the stream reads what the whole text reads.

(`infertriage logs` on a 2 MB .gz once peaked at 4.2 GB: the text, its decoded copy, its
lines and their records all held at once.)
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from tests.bounded import MIB, run_capped, write_gzip

from infertriage.analyze.logs import read_records, source
from infertriage.analyze.logs.source import MAX_LINE_BYTES, MAX_LOG_BYTES, LogSource
from infertriage.cli import main

DATA = Path(__file__).parents[2] / "data" / "logs"
V1 = (
    "(APIServer pid=2917) INFO 12-02 14:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
    "throughput: 120.0 tokens/s, Avg generation throughput: 300.0 tokens/s, Running: 3 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 50.0%, Prefix cache hit rate: 40.0%\n"
)


def _lines_block() -> bytes:
    line = V1.format(s=1).encode()
    return line * (MIB // len(line))


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["logs", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and "Traceback" not in captured.err
    return lines[0]


def test_the_stream_reads_what_the_text_reads() -> None:
    for sample in ("vllm_v1_incident.log", "sglang_queue.log"):
        path = DATA / sample
        text = path.read_text(encoding="utf-8")
        streamed = read_records(LogSource(path).lines(), 0.0)
        assert streamed == read_records(text, 0.0)


def test_a_gzip_bomb_is_refused_before_a_line_is_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = write_gzip(tmp_path / "bomb.log.gz", b"", _lines_block(), MAX_LOG_BYTES // MIB + 8)
    assert os.path.getsize(bomb) < 2 * MIB
    line = _error(capsys, str(bomb))
    assert "more than 128 MiB of log once decompressed" in line and "grep" in line


def test_a_bomb_costs_bounded_memory(tmp_path: Path) -> None:
    # 136 MiB of stats lines in 1 MB of gzip; the old reader held the text four times over
    count = MAX_LOG_BYTES // MIB + 8
    bomb = write_gzip(tmp_path / "bomb.log.gz", b"", _lines_block(), count)
    out = run_capped(
        f"from infertriage.cli import main\nprint('exit', main(['logs', {str(bomb)!r}]))\n"
    )
    assert out.split() == ["exit", "2"]


def test_files_together_past_the_bound_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_LOG_BYTES", 300_000)
    monkeypatch.setattr("infertriage.api.logs.MAX_LOG_BYTES", 300_000)
    part = tmp_path / "a.log"
    part.write_text(V1.format(s=1) * 1000)  # ~230 kB
    line = _error(capsys, str(part), str(part))
    assert line.startswith("infertriage: error: the 2 files hold more than")


def test_a_long_line_is_read_up_to_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a prompt logged whole (100 MB, no newline for 100 MB), then the stats lines
    path = write_gzip(
        tmp_path / "long.log.gz",
        b"INFO 12-02 14:00:00 Received request: prompt: '",
        b"x" * MIB,
        100,
        b"'\n" + "".join(V1.format(s=s) for s in range(10, 60, 10)).encode(),
    )
    reader = LogSource(path)
    lines = list(reader.lines())
    assert len(lines) == 6 and reader.num_long_lines == 1
    assert len(lines[0]) == MAX_LINE_BYTES + 1 and lines[0].endswith("\n")
    assert main(["logs", str(path), "--json"]) == 0
    assert "1 lines longer than 64 KiB were read up to that length" in capsys.readouterr().out


def test_hostile_files_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    assert "is not a file" in _error(capsys, str(fifo))
    nul = tmp_path / "nul.log"
    nul.write_bytes(b"\0" * 4096)
    assert "has no line infertriage reads" in _error(capsys, str(nul))
    utf = tmp_path / "utf.log"
    utf.write_bytes(b"\xff\xfe\xed\xa0\x80 caf\xc3\n" * 10)
    assert "has no line infertriage reads" in _error(capsys, str(utf))
    garbage = tmp_path / "junk.log.gz"
    garbage.write_bytes(gzip.compress(V1.format(s=1).encode()) + b"garbage after it")
    assert main(["logs", str(garbage), "--json"]) == 0  # what came before the fault is kept
    assert "is a gzip cut short (corrupt" in capsys.readouterr().out


@pytest.mark.parametrize("hole", [65535, 65536, MIB])
def test_the_first_line_after_a_nul_filled_hole_is_read(tmp_path: Path, hole: int) -> None:
    """logrotate's `copytruncate` leaves a hole of NULs as long as the log was, then the
    writer's next line: that line is read whole (it was merged into the hole's 64 KiB and
    cut, and a one-line log read as none)."""
    path = tmp_path / "rotated.log"
    path.write_bytes(b"\x00" * hole + V1.format(s=1).encode())
    lines = list(LogSource(path).lines())
    assert lines == [V1.format(s=1)]
    assert len(read_records(lines, near_unix_s=0.0)) == 1
