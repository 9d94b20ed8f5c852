"""The live view in a real terminal (issue 20 part 4): `diagnose` against the twin, run under
pseudo-terminals, shows its phases while it runs and before the map; `--json` keeps stdout
to its one document and draws nothing, even where both streams are terminals."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from infertriage.cli.common import live_view

# The smallest diagnose: 1 s levels of tiny requests (the twin's start, ~5 s of load, the
# 2 s drain and the analysis: about 10 s on a busy machine).
_SHORT = ["diagnose", "--duration", "2", "--workload", "synthetic:input=8,output=4"]
_LIMIT_S = 30.0
_CONTROL = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True, slots=True)
class _Screen:
    code: int
    out: list[tuple[float, bytes]]  # (when read, bytes) from the stdout terminal
    err: list[tuple[float, bytes]]  # from the stderr terminal (the same one unless split)

    def text(self, reads: list[tuple[float, bytes]]) -> str:
        raw = b"".join(data for _, data in reads)
        return _CONTROL.sub(b"", raw).decode("utf-8", "replace").replace("\r\n", "\n")

    def first_seen(self, reads: list[tuple[float, bytes]], needle: str) -> float | None:
        seen = b""
        for when, data in reads:
            seen += data
            if needle.encode() in _CONTROL.sub(b"", seen):
                return when
        return None


def _terminal() -> tuple[int, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    return master, slave


def _read_all(fds: dict[int, list[tuple[float, bytes]]], process: subprocess.Popen[bytes]) -> None:
    """Drain the terminals as a terminal would (a full one would block the command)."""
    deadline, open_fds = time.monotonic() + _LIMIT_S, set(fds)
    while open_fds:
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"diagnose ran past {_LIMIT_S:.0f} s in a terminal")
        ready, _, _ = select.select(list(open_fds), [], [], 0.2)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the command closed its end
                data = b""
            if data:
                fds[fd].append((time.monotonic(), data))
            else:
                open_fds.discard(fd)


def _in_terminal(*words: str, split: bool = False) -> _Screen:
    out_master, out_slave = _terminal()
    err_master, err_slave = _terminal() if split else (out_master, out_slave)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTY_", "NO_COLOR"))}
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [sys.executable, "-m", "infertriage", *words], env=env, stdin=out_slave,
        stdout=out_slave, stderr=err_slave, start_new_session=True,
    )  # fmt: skip
    for fd in {out_slave, err_slave}:
        os.close(fd)
    reads: dict[int, list[tuple[float, bytes]]] = {out_master: [], err_master: []}
    try:
        _read_all(reads, process)
        code = process.wait(timeout=10)
    finally:
        for fd in reads:
            os.close(fd)
    return _Screen(code, reads[out_master], reads[err_master])


@pytest.mark.slow
def test_diagnose_in_a_terminal_shows_its_phases_before_the_map(tmp_path: Path) -> None:
    screen = _in_terminal(*_SHORT, "--out", str(tmp_path / "run"))
    text = screen.text(screen.out)
    assert screen.code == 0, text
    for phase in ("starting the twin", "warm-up · concurrency=1", "measure · concurrency=16",
                  "overload · rate=", "drain", "analysis"):  # fmt: skip
        assert f"✓ {phase}" in text, phase
    assert re.search(r"✓ measure · concurrency=16  \d+ done, 0 failed  TTFT p50 \d", text)
    shown, mapped = (
        screen.first_seen(screen.out, "warm-up"),
        screen.first_seen(screen.out, "Bottleneck map"),
    )
    assert shown is not None and mapped is not None
    # drawn while it ran: the load and the 2 s drain lie between the first phase and the map
    assert mapped - shown > 2.0
    assert text.index("✓ analysis") < text.index("Bottleneck map")
    raw = b"".join(data for _, data in screen.out)
    assert raw.rindex(b"\x1b[?25h") > raw.rindex(b"\x1b[?25l")  # the cursor shown again


@pytest.mark.slow
def test_diagnose_json_in_a_terminal_prints_one_document_and_no_live_view(tmp_path: Path) -> None:
    screen = _in_terminal(*_SHORT, "--json", "--out", str(tmp_path / "run"), split=True)
    assert screen.code == 0, screen.text(screen.err)
    document = json.loads(screen.text(screen.out))
    assert document["schema"].startswith("infertriage.diagnosis/")
    assert "warm-up" not in screen.text(screen.err)
    assert not any(b"\x1b[?25l" in data for _, data in screen.err)  # the cursor never hidden


@pytest.mark.parametrize("forced", [None, "1"])
def test_no_live_view_where_stdout_is_not_a_terminal(
    forced: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if forced is not None:
        monkeypatch.setenv("FORCE_COLOR", forced)  # rich would colour a pipe; still no view
    assert not sys.stdout.isatty()  # pytest's capture
    with live_view(json_out=False, progress=True) as view:
        assert view is None
