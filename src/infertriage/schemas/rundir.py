"""schemas, level 0: the run directory and its files.

A run directory holds run.json, requests.jsonl, metrics.jsonl, signals.jsonl,
raw/, diagnosis.json and later report.html. JSONL files are append-only and
each record is flushed to the OS as soon as it is complete, so a killed
process keeps every record it finished; a write that fails (a full disk) is
cut back to the last whole record and raised as an `OSError` naming the file.
Readers name the file and line of a malformed record.

A run claims its directory (`RunDir.create`): it holds an advisory lock on
`.infertriage.lock` (which names its pid) until the `RunDir` is released or
dropped, or the process ends however it ends (the kernel lets go of the lock).
A second run given the same `--out` meanwhile stops with one sentence, whether
it started at the same moment or later, `--force` or not; a lock file left by a
run that died is taken over. Within one process too a directory has one claim
at a time; a `RunDir` that only garbage holds is collected first.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, BinaryIO, Self, TypeVar

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from infertriage.schemas.errors import UserError
from infertriage.schemas.inputs import why_missing
from infertriage.schemas.recordjson import dumps as _dumps
from infertriage.schemas.runinfo import RUN_SCHEMA, RunInfo, first_error, parse_run_info

if sys.platform != "win32":  # Windows has no flock: its runs go unclaimed
    import fcntl

__all__ = [
    "LOCK_NAME",
    "RUN_SCHEMA",
    "JsonlWriter",
    "RunDir",
    "RunInfo",
    "check_out",
    "holds_run",
    "read_json",
    "read_jsonl",
    "write_json",
]

LOCK_NAME = ".infertriage.lock"  # held by the run writing into the directory
T = TypeVar("T")


class JsonlWriter:
    """Append records to a JSONL file, one `write` + `flush` per record.

    Dataclasses, pydantic models and plain JSON values are accepted. Safe to
    share between threads; each line reaches the OS whole.
    """

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = path.open("ab", buffering=0)
        self.failed: OSError | None = None  # the write that failed: every later one fails
        self.num_written = 0

    def write(self, record: object) -> None:
        if isinstance(record, BaseModel):
            record = record.model_dump(mode="json")
        line = _dumps(record) + b"\n"
        with self._lock:
            if self.failed is not None:
                raise OSError(self.failed.errno, self.failed.strerror, str(self.path))
            if self._file is None:
                raise ValueError(f"{self.path} is closed")
            try:
                _write_all(self._file, line)
                if self._fsync:
                    os.fsync(self._file.fileno())
            except OSError as err:
                self.failed = _naming(err, self.path)  # nothing is appended after it
                raise self.failed from None
            self.num_written += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _write_all(file: IO[bytes], data: bytes) -> None:
    """Write `data` whole; when the disk fills midway, cut the file back to where it was,
    so that it ends with its last whole record."""
    done = 0
    try:
        while done < len(data):
            written = file.write(memoryview(data)[done:])
            if not written:  # a raw write that took nothing: nothing more will fit
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += written
    except OSError:
        if done:
            with contextlib.suppress(OSError):
                file.truncate(os.fstat(file.fileno()).st_size - done)
        raise


def _naming(err: OSError, path: Path) -> OSError:
    """`err`, naming `path` where the failed call did not (a write names no file)."""
    if err.filename is None:
        err.filename = str(path)
    return err


def read_jsonl(path: Path, record_type: type[T], *, skip_partial_tail: bool = True) -> Iterator[T]:
    """Yield validated records; a malformed line is a `UserError` naming file and line.

    A last line with no newline is what a writer killed mid-line leaves; with
    `skip_partial_tail` it is dropped when it does not parse, and every
    complete record before it is kept.
    """
    adapter: TypeAdapter[T] = TypeAdapter(record_type)
    with _open_regular(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            is_tail = not line.endswith(b"\n")
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                if is_tail and skip_partial_tail:
                    return
                raise UserError(f"{path}:{lineno}: malformed JSON ({err.msg}).") from err
            try:
                yield adapter.validate_python(value)
            except ValidationError as err:
                raise UserError(f"{path}:{lineno}: invalid record ({first_error(err)}).") from err


def write_json(path: Path, document: object) -> None:
    """Write a JSON document atomically: a reader sees the old file or the new one, whole."""
    if isinstance(document, BaseModel):
        document = document.model_dump(mode="json", by_alias=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(_dumps(document) + b"\n")
        tmp.replace(path)
    except OSError as err:  # a full disk: the old file stays whole, no half-written copy
        with contextlib.suppress(OSError):
            tmp.unlink()
        err.filename = str(path)  # the file meant, not its temporary copy
        raise


def _open_regular(path: Path) -> BinaryIO:
    """`path` open for reading; a FIFO (it waits for a writer forever) or a device (/dev/zero
    never ends) where a run's file should be is refused unopened."""
    if path.exists() and not path.is_file():
        raise UserError(f"cannot read {path}: it is not a regular file.")
    try:
        return path.open("rb")
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}.") from err


def read_json(path: Path) -> Any:
    with _open_regular(path) as stream:
        try:
            data = stream.read()
        except OSError as err:
            raise UserError(f"cannot read {path}: {err.strerror}.") from err
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise UserError(f"{path} is not valid JSON ({err.msg}).") from err


def holds_run(folder: Path) -> bool:
    """Does `folder` hold a run (its run.json or requests.jsonl)?"""
    return any((folder / name).is_file() for name in ("run.json", "requests.jsonl"))


def check_out(out: Path | None, *, force: bool = False) -> None:
    """Refuse an `--out` that is a file, that another run is writing, or that holds a run
    unless `force`: before any load."""
    if out is None or not out.exists():
        return
    _check_folder(out, force=force)
    _check_unclaimed(out)


def _check_folder(out: Path, *, force: bool) -> None:
    if not out.is_dir():
        raise UserError(f"{out} exists and is not a directory.")
    if holds_run(out) and not force:
        raise UserError(
            f"{out} already holds a run: choose another --out, or add --force to replace it."
        )


def _holder(fd: int) -> int | None:
    """The pid a lock file names."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(os.pread(fd, 32, 0).split()[0])
    return None


def _try_lock(fd: int, operation: int) -> bool:
    """`flock` without waiting. A lock this process holds only in garbage (a `RunDir` no
    one refers to, kept by a reference cycle such as an exception's) is collected first."""
    for attempt in range(2):
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            if attempt or _holder(fd) != os.getpid():
                return False
            gc.collect()
        else:
            return True
    return False


def _in_use(out: Path, fd: int) -> UserError:
    pid = _holder(fd)
    if pid is not None and pid != os.getpid():
        return UserError(
            f"{out} is in use by another run (pid {pid}): choose another --out, "
            "or wait until that run ends."
        )
    return UserError(f"{out} is in use by another run: choose another --out, or wait for it.")


def _check_unclaimed(out: Path) -> None:
    """A run writing into `out` now is refused here, before any load (`_claim` decides)."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(out / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return  # no lock file: no run claims it (or one this process cannot read)
    try:
        if not _try_lock(fd, fcntl.LOCK_SH):
            raise _in_use(out, fd)
    except OSError:
        pass  # a file system without locks: nothing to learn
    finally:
        os.close(fd)


class _Claim:
    """A run's lock on its directory, let go by `release()`, when dropped, or at exit."""

    def __init__(self, fd: int, path: Path) -> None:
        self._let_go = weakref.finalize(self, _let_go, fd, path)

    def release(self) -> None:
        self._let_go()


def _let_go(fd: int, path: Path) -> None:
    with contextlib.suppress(OSError):
        if _same_file(fd, path):
            path.unlink()  # while still locked: a run that opened it meanwhile tries again
    with contextlib.suppress(OSError):
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        return False


def _claim(out: Path) -> _Claim | None:
    """Lock `out` for this run; a `UserError` when another run holds it. None on a file
    system without locks, where the run goes on unclaimed, as before."""
    if sys.platform == "win32":
        return None
    path = out / LOCK_NAME
    for _ in range(100):  # each turn lost to a run that let go of it meanwhile
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UserError(f"cannot create run directory {out}: {err.strerror}.") from err
        try:
            locked = _try_lock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks
            os.close(fd)
            return None
        if not locked:
            error = _in_use(out, fd)
            os.close(fd)
            raise error
        if _same_file(fd, path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return _Claim(fd, path)
        os.close(fd)
    raise UserError(f"cannot claim run directory {out}: other runs keep taking it.")


def _clear(folder: Path) -> None:
    """`--force`: empty a run directory, so the new run's files are its only ones."""
    try:
        for entry in folder.iterdir():
            if entry.name == LOCK_NAME:  # this run's claim
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    except OSError as err:
        raise UserError(f"cannot clear run directory {folder}: {err.strerror}.") from err


def _new_folder(base: Path, prefix: str) -> Path:
    """`base/<prefix>-<UTC time>[-N]`, made here: the creation claims the name, so two runs
    started in the same second (two threads, two processes) never share one folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create run directory {base}: {err.strerror}.") from err
    for suffix in range(1, 10_000):
        out = base / (f"{prefix}-{stamp}" if suffix == 1 else f"{prefix}-{stamp}-{suffix}")
        try:
            out.mkdir()
        except FileExistsError:
            continue
        except OSError as err:
            raise UserError(f"cannot create run directory {out}: {err.strerror}.") from err
        return out
    raise UserError(f"cannot create a run directory in {base}: every name is taken.")


@dataclass(frozen=True, slots=True)
class RunDir:
    """The paths of one run directory; one made by `create` holds its claim (`release`)."""

    root: Path
    claim: _Claim | None = field(default=None, compare=False, repr=False)

    @classmethod
    def create(
        cls,
        out: Path | None,
        *,
        prefix: str = "run",
        base: Path = Path("runs"),
        force: bool = False,
    ) -> RunDir:
        """Make `out`, or `runs/<prefix>-<UTC time>` when `out` is None, and claim it.

        An `out` that already holds a run is refused, so two runs never share
        one requests.jsonl; `force` empties it first. An `out` another run is
        writing is refused, `force` or not.
        """
        if out is None:
            out = _new_folder(base, prefix)
        check_out(out, force=force)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create run directory {out}: {err.strerror}.") from err
        claim = _claim(out)
        try:
            _check_folder(out, force=force)  # a run that ended since check_out, not forced
            if holds_run(out):
                _clear(out)
            (out / "raw").mkdir(parents=True, exist_ok=True)
        except OSError as err:
            if claim is not None:
                claim.release()
            raise UserError(f"cannot create run directory {out}: {err.strerror}.") from err
        except BaseException:
            if claim is not None:
                claim.release()
            raise
        return cls(out, claim)

    def release(self) -> None:
        """Let go of the directory's claim (also done when the last reference goes)."""
        if self.claim is not None:
            self.claim.release()

    @classmethod
    def open(cls, root: Path) -> RunDir:
        """An existing run directory; it must at least hold run.json."""
        if not root.exists():
            raise UserError(f"{root} is not a run directory (it {why_missing(root)}).")
        if not (root / "run.json").is_file():
            raise UserError(f"{root} is not a run directory (no run.json in it).")
        return cls(root)

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def requests(self) -> Path:
        return self.root / "requests.jsonl"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def signals(self) -> Path:
        return self.root / "signals.jsonl"

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def diagnosis(self) -> Path:
        return self.root / "diagnosis.json"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    def read_info(self) -> RunInfo:
        """run.json through its command's model (`schemas.runinfo`)."""
        return parse_run_info(read_json(self.run_json), str(self.run_json))

    def write_info(self, info: RunInfo) -> None:
        write_json(self.run_json, info)

    def iter_records(self, path: Path, record_type: type[T]) -> Iterator[T]:
        """Records of a JSONL file of this run; a missing file is an empty one."""
        if not path.exists():
            return iter(())
        return read_jsonl(path, record_type)
