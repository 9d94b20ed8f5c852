"""twin, level 2: start the twin as a server process of its own and stop it.

Takes a scenario name or YAML path; gives a running twin's base URL once it
answers `/health` with 200. The twin runs in its own process, as a real
server would, so its front-end and engine threads never share a GIL with the
load generator that measures them, and in its own process group, so that a
Ctrl-C to the command reaches the command alone, which stops the twin last. The
twin is told this process's pid (`--parent-pid`, `schemas.lifeline`): when this
process dies without stopping it (SIGKILL), the twin gets SIGTERM and stops too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from infertriage.net import sync_request
from infertriage.schemas.errors import UserError

__all__ = ["TwinProcess"]

_READY_PREFIX = "infertriage twin listening on "


class TwinProcess:
    """`with TwinProcess("kv-pressure") as twin: … twin.url …`"""

    def __init__(
        self,
        scenario: str = "healthy",
        *,
        port: int = 0,
        load_time_s: float | None = None,
        timeout_s: float = 30.0,
        profile_dir: Path | None = None,
        otlp_endpoint: str | None = None,
    ) -> None:
        self.profile_dir = profile_dir
        self.otlp_endpoint = otlp_endpoint  # export vLLM's request spans there
        self.scenario = scenario
        self.port = port
        self.load_time_s = load_time_s
        self.timeout_s = timeout_s
        self.url = ""
        self.startup_s = 0.0  # process start → /health 200
        self.started_s: float | None = None  # time.monotonic() when the process started
        self._proc: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        command = [sys.executable, "-m", "infertriage", "twin", "--scenario", self.scenario]
        command += ["--port", str(self.port), "--parent-pid", str(os.getpid())]
        if self.load_time_s is not None:
            command += ["--load-time", str(self.load_time_s)]
        if self.profile_dir is not None:
            command += ["--profile-dir", str(self.profile_dir)]
        if self.otlp_endpoint is not None:
            command += ["--otlp-traces-endpoint", self.otlp_endpoint]
        started = self.started_s = time.monotonic()
        # A process group of its own: the Ctrl-C a terminal sends to ours must not stop the
        # server before the command has measured, written and stopped it itself.
        self._proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0
        )
        self.url = self._read_url(self._proc)
        self._wait_healthy(started)
        self.startup_s = time.monotonic() - started
        return self.url

    def _read_url(self, proc: subprocess.Popen[str]) -> str:
        stdout: IO[str] | None = proc.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line.startswith(_READY_PREFIX):
            proc.wait(timeout=self.timeout_s)
            stderr = proc.stderr.read() if proc.stderr is not None else ""
            self.stop()
            last = (stderr.strip().splitlines() or ["it exited"])[-1]
            raise UserError(f"the twin did not start: {last.removeprefix('infertriage: error: ')}")
        return line[len(_READY_PREFIX) :].strip()

    def _wait_healthy(self, started: float) -> None:
        while time.monotonic() - started < self.timeout_s:
            if sync_request(f"{self.url}/health", timeout_s=2).status == 200:
                return
            time.sleep(0.05)
        self.stop()
        raise UserError(f"the twin at {self.url} was not healthy after {self.timeout_s:.0f} s.")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:  # Ctrl-C while it starts: no server left behind
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
