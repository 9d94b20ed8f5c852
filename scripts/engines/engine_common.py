"""What the engine scripts in scripts/engines/ share: their cache, and their servers' processes.

Test tooling, not part of the package; standard library only. vllm_cpu.py and llama_cpp.py
put this folder on sys.path and `import engine_common`, so it loads both when they run as
scripts and when tests load them by path. It takes the cache root ($INFERTRIAGE_ENGINE_CACHE,
else ~/.cache/infertriage/engines) and command lines, and gives install locks, completion
markers, logged runs and pid files, and servers detached in a process group of their own:
started, waited on until they answer over HTTP, and stopped with SIGTERM, then SIGKILL.
"""

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = ".infertriage-complete.json"
LOG_TAIL_LINES = 40


def get_cache_root() -> Path:
    """$INFERTRIAGE_ENGINE_CACHE, else ~/.cache/infertriage/engines."""
    env = os.environ.get("INFERTRIAGE_ENGINE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "infertriage" / "engines"


# --- cache ---------------------------------------------------------------------------


def read_marker(folder: Path) -> dict[str, object] | None:
    """The marker that says folder is complete, or None when it is missing or unreadable."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(folder: Path, data: dict[str, object]) -> None:
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(folder / MARKER)


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """Serialise installs of one thing across processes (parallel test workers)."""
    root = get_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    env: dict[str, str] | None = None,
    stdin: int | None = None,
) -> None:
    """Run cmd with its output appended to log; on failure raise with the log's tail."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(
            cmd, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, env=env, check=False
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:4])} … exited {proc.returncode}; last lines of {log}:\n"
            + tail(log, LOG_TAIL_LINES)
        )


def tail(path: Path, num_lines: int) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(lines[-num_lines:])


# --- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(url: str, body: dict[str, object] | None = None, timeout_s: float = 10.0) -> int:
    """The HTTP status of a GET (or a JSON POST when body is given); 0 when unreachable."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def write_pid_file(path: Path, pid: int) -> None:
    path.write_text(f"{pid}\n")


def read_pid_file(path: Path) -> int:
    return int(path.read_text().split()[0])


def start_detached(
    cmd: Sequence[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """cmd as the leader of a new session and process group, its output in log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        # Its own session and process group, so stop_group() signals everything it
        # started and a test runner's Ctrl-C does not reach it first.
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=cwd,
        )


@dataclass(frozen=True, slots=True)
class Server:
    """A running server: its base URL (no /v1), process-group leader, log and served model."""

    url: str
    pid: int
    ready_s: float
    log_path: Path
    model: str


@dataclass(frozen=True, slots=True)
class ReadyCheck:
    """A server is ready once up_path answers 200, and then a completion with probe does."""

    name: str  # the server, in error messages
    up_path: str
    up_timeout_s: float
    probe: dict[str, object]
    probe_timeout_s: float
    poll_s: float


def wait_ready(
    proc: subprocess.Popen[bytes],
    url: str,
    check: ReadyCheck,
    *,
    log_path: Path,
    timeout_s: float,
    started: float | None = None,
) -> None:
    """Return once check passes at url; raise RuntimeError, with the log's tail, if proc
    exits first or timeout_s passes from started (a time.monotonic(); default now)."""
    deadline = (time.monotonic() if started is None else started) + timeout_s
    is_up = False
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise RuntimeError(
                f"{check.name} exited {code} before it was ready; last lines of {log_path}:\n"
                + tail(log_path, LOG_TAIL_LINES)
            )
        is_up = is_up or http_status(url + check.up_path, timeout_s=check.up_timeout_s) == 200
        completions = f"{url}/v1/completions"
        if is_up and http_status(completions, check.probe, check.probe_timeout_s) == 200:
            return
        time.sleep(check.poll_s)
    raise RuntimeError(
        f"{check.name} not ready at {url} in {timeout_s} s; last lines of {log_path}:\n"
        + tail(log_path, LOG_TAIL_LINES)
    )


def group_alive(pgid: int, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Whether any process of the group is left; proc is its leader's Popen, if ours."""
    # Reap the leader if it is our child, else its zombie keeps the group alive.
    if proc is not None:
        proc.poll()
    else:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pgid, os.WNOHANG)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(
    pid: int,
    *,
    grace_s: float,
    poll_s: float,
    second_term_s: float | None = None,
    proc: subprocess.Popen[bytes] | None = None,
) -> bool:
    """SIGTERM the process group led by pid, SIGKILL after grace_s; False if it was gone.

    With second_term_s, SIGTERM is sent again that long after the first, for a server whose
    first one only drains. proc, the leader's Popen if this process started it, is reaped
    through it, so that it does not warn "subprocess … is still running" when collected.
    """
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    started = time.monotonic()
    resend_ts = None if second_term_s is None else started + second_term_s
    while time.monotonic() < started + grace_s:
        if not group_alive(pid, proc):
            return True
        if resend_ts is not None and time.monotonic() >= resend_ts:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            resend_ts = None
        time.sleep(poll_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while group_alive(pid, proc) and time.monotonic() < started + grace_s + 10:
        time.sleep(min(poll_s, 0.1))
    return True
