"""api, level 5: what `diagnose` captures from the server beside the load — a profile, its log.

`ProfileWindow` asks the server for a PyTorch-profiler trace over part of the
measured level (`POST /start_profile`, then `/stop_profile` after `--profile
S` seconds or at the level's end), as vLLM serves them when started with
`VLLM_TORCH_PROFILER_DIR`. The server writes the trace on its own disk:
`take_profiles` copies the ones written since the start from `--profile-dir`
(when that folder is on this host) into the run's raw/traces/, waiting for
the writes to finish. "Since the start" is what changed against a listing of the
folder taken at `start()`, never a file time against this host's clock: the
server's disk, or its clock, may disagree with ours. `keep_logs` copies the server's log files into
raw/logs/ once the load is over, so the lines written during the run are in
them, with a note for a log of which infertriage reads no line
(`analyze.server_log.reads_no_line`: the run goes on, without its evidence);
`read_log` reads one (plain or gzip) for the analysis.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from infertriage.analyze.logs.records import no_line_read
from infertriage.analyze.logs.source import LogSource
from infertriage.analyze.server_log import reads_no_line
from infertriage.net import sync_request
from infertriage.schemas import RunDir, UserError
from infertriage.schemas.inputs import why_missing

__all__ = [
    "Listing",
    "ProfileWindow",
    "check_files",
    "keep_logs",
    "read_log",
    "read_log_upto_cut",
    "take_profiles",
    "trace_listing",
]

_STOP_TIMEOUT_S = 120.0  # the server may write a large trace before it answers
_WRITE_WAIT_S = 30.0
_POLL_S = 0.5
_TRACE_GLOB = "*.pt.trace.json*"


def _post(url: str, timeout_s: float) -> str | None:
    """None when the server took it; else why not, in a few words."""
    answer = sync_request(url, method="POST", data=b"{}", timeout_s=timeout_s)
    return None if answer.ok else answer.error


Listing = dict[Path, tuple[int, int]]  # trace file -> (mtime in ns, size)


def trace_listing(profile_dir: Path | None) -> Listing:
    """The traces under `profile_dir` now; empty when there is no such folder."""
    if profile_dir is None or not profile_dir.is_dir():
        return {}
    listing: Listing = {}
    for path in profile_dir.rglob(_TRACE_GLOB):
        try:
            stat = path.stat()
        except OSError:  # removed while we listed
            continue
        listing[path] = (stat.st_mtime_ns, stat.st_size)
    return listing


class ProfileWindow:
    """`start()` before the measured level, `stop()` after it; stops early after `seconds`."""

    def __init__(self, url: str, seconds: float | None, profile_dir: Path | None = None) -> None:
        self.url, self.seconds, self.profile_dir = url.rstrip("/"), seconds, profile_dir
        self.before: Listing = {}
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._running = False
        self._timer: threading.Timer | None = None

    def start(self) -> bool:
        self.before = trace_listing(self.profile_dir)
        refused = _post(f"{self.url}/start_profile", timeout_s=10.0)
        if refused is not None:
            self.notes.append(
                f"the server refused /start_profile ({refused}): start vLLM with "
                "VLLM_TORCH_PROFILER_DIR=DIR to allow profiling; no trace was captured."
            )
            return False
        self._running = True
        if self.seconds is not None:
            self._timer = threading.Timer(self.seconds, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return True

    def stop(self) -> None:
        with self._lock:
            if not self._running:
                return
            self._running = False
        if self._timer is not None:
            self._timer.cancel()
        refused = _post(f"{self.url}/stop_profile", timeout_s=_STOP_TIMEOUT_S)
        if refused is not None:
            self.notes.append(f"/stop_profile failed ({refused}); the trace may be incomplete.")


def _settled(paths: Sequence[Path]) -> bool:
    before = [p.stat().st_size for p in paths]
    time.sleep(_POLL_S)
    return before == [p.stat().st_size for p in paths]


def take_profiles(profile_dir: Path, before: Listing, run: RunDir) -> list[Path]:
    """Copy the traces under `profile_dir` that are new or changed against `before`."""
    deadline = time.monotonic() + _WRITE_WAIT_S
    found: list[Path] = []
    while time.monotonic() < deadline:
        now = trace_listing(profile_dir)
        found = sorted(p for p, seen in now.items() if before.get(p) != seen)
        if found and _settled(found):
            break
        time.sleep(_POLL_S)
    target = run.raw / "traces"
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for index, path in enumerate(found):
        copy = target / f"profile-{index:02d}-{path.name}"
        shutil.copyfile(path, copy)
        copied.append(copy)
    return copied


def check_files(paths: Sequence[Path], flag: str) -> None:
    for path in paths:
        if not path.exists():
            raise UserError(f"{flag} {path} {why_missing(path)}.")
        if not path.is_file():
            raise UserError(f"{flag} {path} is not a file.")


def keep_logs(run: RunDir, logs: Sequence[Path]) -> list[str]:
    """Copy the server's logs into raw/logs/ (after the load: the run's lines are in them);
    a note for each that gives no evidence, since the load's measurements stand without it."""
    target = run.raw / "logs"
    target.mkdir(parents=True, exist_ok=True)
    notes = []
    for index, path in enumerate(logs):
        kept = target / f"{index:02d}-{path.name}"
        try:
            shutil.copyfile(path, kept)
        except OSError as err:
            raise UserError(f"--log {path} cannot be read ({err.strerror}).") from err
        notes.append(_unread_note(path, kept))
    return [note for note in notes if note is not None]


def _unread_note(path: Path, kept: Path) -> str | None:
    """The note for a log that gives no evidence, judged on the copy the run keeps (what the
    analysis reads; the user's file may rotate meanwhile); None for one that does, and for
    one that does not read at all: the analysis says why, once run.json is written."""
    try:
        unread = reads_no_line(kept)
    except UserError:
        return None
    return f"--log {no_line_read(str(path))}: it gave the map no evidence" if unread else None


def read_log(path: Path) -> str:
    """A log's text; `.gz` is decompressed, and a cut gzip is one clear error."""
    text, cut = read_log_upto_cut(path)
    if cut is not None:
        raise UserError(f"{path} is not a whole gzip file ({cut}).")
    return text


def read_log_upto_cut(path: Path) -> tuple[str, str | None]:
    """A log's text and, for a gzip cut short (a copy taken mid-write), why it stopped early.

    What was decompressed before the cut is kept: an incident's last minutes are often there.
    A file that is not gzip at all, or cannot be read, is one clear error; so is one of more
    than `MAX_LOG_BYTES` of text, and a line longer than `MAX_LINE_BYTES` is read up to there
    (`analyze.logs.source`, as `infertriage logs` reads them).
    """
    source = LogSource(path)
    text = "".join(source.lines())
    return text, source.cut
