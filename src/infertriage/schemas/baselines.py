"""schemas, level 0: the local store of saved baselines.

A baseline is a copy of a run directory's measurements — run.json (config,
environment, server configuration, summary), requests.jsonl, metrics.jsonl,
signals.jsonl and diagnosis.json; not raw/ — under `<store>/<name>/`, with a
`baseline.json` saying where and when it came from. The store is the
platform's data folder (`$XDG_DATA_HOME/infertriage/baselines`, else
`~/.local/share/…`; `~/Library/Application Support/…` on macOS;
`%LOCALAPPDATA%\\…` on Windows), or `$INFERTRIAGE_HOME/baselines`, or the
folder a command's `--store` names.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from infertriage.schemas.errors import UserError
from infertriage.schemas.records import RequestRecord
from infertriage.schemas.rundir import RunDir, read_json, write_json

__all__ = ["BaselineStore", "SavedBaseline", "default_store_root"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_COPIED = ("run.json", "requests.jsonl", "metrics.jsonl", "signals.jsonl", "diagnosis.json")
_META = "baseline.json"


def default_store_root() -> Path:
    """Where baselines live when no `--store` is given (see the module docstring)."""
    home = os.environ.get("INFERTRIAGE_HOME")
    if home:
        return Path(home) / "baselines"
    if sys.platform == "win32":
        data = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        data = Path.home() / "Library" / "Application Support"
    else:
        data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "infertriage" / "baselines"


@dataclass(frozen=True, slots=True)
class SavedBaseline:
    name: str
    path: Path
    source: str
    saved_at: str
    command: str


def _check_records(run: RunDir) -> None:
    """Every record of the run reads (a cut last line is dropped, as `compare` drops it),
    and there is one at least."""
    if sum(1 for _ in run.iter_records(run.requests, RequestRecord)) == 0:
        raise UserError(f"{run.requests} holds no request: nothing to compare a run with.")


class BaselineStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_store_root()

    def _path(self, name: str) -> Path:
        if not _NAME.fullmatch(name):
            raise UserError(
                f"baseline name {name!r} must be letters, digits, '.', '_' or '-' "
                "(at most 100, starting with a letter or digit)."
            )
        return self.root / name

    def save(self, name: str, run: RunDir, *, force: bool = False) -> SavedBaseline:
        """Copy `run`'s measurements under `name`; an existing name needs `force`."""
        target = self._path(name)
        if target.exists() and not force:
            raise UserError(
                f"baseline {name!r} already exists in {self.root}: add --force to replace it."
            )
        command = run.read_info().command  # a run.json that does not parse fails here
        _check_records(run)  # and records `compare` could not read, before anything is replaced
        staging = self.root / f".{name}.saving"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir(parents=True)
            for file in _COPIED:
                if (run.root / file).is_file():
                    shutil.copy2(run.root / file, staging / file)
            saved_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            meta = {
                "name": name,
                "source": str(run.root.resolve()),
                "saved_at": saved_at,
                "command": command,
            }
            write_json(staging / _META, meta)
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        except OSError as err:
            shutil.rmtree(staging, ignore_errors=True)
            raise UserError(
                f"cannot save baseline {name!r} in {self.root}: {err.strerror}."
            ) from err
        return self._describe(target)

    def _describe(self, path: Path) -> SavedBaseline:
        meta = read_json(path / _META)
        return SavedBaseline(
            name=path.name,
            path=path,
            source=str(meta.get("source", "")),
            saved_at=str(meta.get("saved_at", "")),
            command=str(meta.get("command", "")),
        )

    def get(self, name: str) -> RunDir:
        path = self._path(name)
        if not (path / _META).is_file():
            known = ", ".join(b.name for b in self.list()) or "none"
            raise UserError(f"no baseline {name!r} in {self.root} (saved: {known}).")
        return RunDir.open(path)

    def list(self) -> list[SavedBaseline]:
        if not self.root.is_dir():
            return []
        return [self._describe(p) for p in sorted(self.root.iterdir()) if (p / _META).is_file()]

    def delete(self, name: str) -> None:
        path = self._path(name)
        if not (path / _META).is_file():
            raise UserError(f"no baseline {name!r} in {self.root}.")
        shutil.rmtree(path)
