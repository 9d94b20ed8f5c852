"""The baseline store: save copies a run's measurements, names are checked, nothing half-saved."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from infertriage.schemas import (
    BaselineStore,
    BenchRunInfo,
    RunDir,
    RunServerConfig,
    UserError,
    default_store_root,
)

_RECORD = '{"id": "a", "scheduled_ts": 0.0, "sent_ts": 0.0}\n'


def _run(tmp_path: Path) -> RunDir:
    run = RunDir.create(tmp_path / "run")
    run.write_info(BenchRunInfo(wall_anchor_s=1.0, server_config=RunServerConfig(engine="x")))
    run.requests.write_text(_RECORD)
    (run.raw / "big.trace.json").write_text("{}")
    return run


def test_save_copies_the_measurements_but_not_raw(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "store")
    saved = store.save("v1.2_prod", _run(tmp_path))
    assert saved.command == "bench" and saved.source.endswith("run")
    copy = store.get("v1.2_prod")
    assert copy.read_info().server_config.engine == "x"
    assert copy.requests.read_text() == _RECORD
    assert not (copy.root / "raw").exists()
    assert [b.name for b in store.list()] == ["v1.2_prod"]


def test_an_existing_name_needs_force(tmp_path: Path) -> None:
    store, run = BaselineStore(tmp_path / "store"), _run(tmp_path)
    store.save("base", run)
    with pytest.raises(UserError, match="--force"):
        store.save("base", run)
    store.save("base", run, force=True)
    assert len(store.list()) == 1


@pytest.mark.parametrize("name", ["", "../evil", "a/b", ".hidden", "x" * 101])
def test_bad_names_are_user_errors(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError, match="baseline name"):
        BaselineStore(tmp_path).save(name, _run(tmp_path))


def test_unknown_baseline_names_the_saved_ones(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "store")
    store.save("one", _run(tmp_path))
    with pytest.raises(UserError, match=r"no baseline 'two'.*saved: one"):
        store.get("two")
    store.delete("one")
    assert store.list() == []


def test_a_directory_that_is_no_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a run directory"):
        BaselineStore(tmp_path / "store").save("x", RunDir.open(tmp_path / "empty"))


@pytest.mark.skipif(sys.platform in {"win32", "darwin"}, reason="XDG applies on Linux")
def test_store_root_follows_infertriage_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("INFERTRIAGE_HOME", str(tmp_path))
    assert default_store_root() == tmp_path / "baselines"
    monkeypatch.delenv("INFERTRIAGE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_store_root() == tmp_path / "data" / "infertriage" / "baselines"


@pytest.mark.parametrize(
    ("requests", "needle"),
    [
        (b"\xff\xfe garbage\n", "malformed JSON"),
        (b"[1, 2]\n", "invalid record"),
        (b"", "no request"),
    ],
)
def test_a_run_whose_records_do_not_read_is_refused_and_the_old_baseline_kept(
    tmp_path: Path, requests: bytes, needle: str
) -> None:
    store, run = BaselineStore(tmp_path / "store"), _run(tmp_path)
    store.save("base", run)
    run.requests.write_bytes(requests)
    with pytest.raises(UserError, match=needle):  # before: saved, and `compare` failed on it
        store.save("base", run, force=True)
    assert store.get("base").requests.read_text() == _RECORD
