"""api, level 5: what `diagnose --from-run` takes beside the run directory.

Takes a `DiagnoseSpec` with `from_run`; gives nothing, or one `UserError` naming every
option the re-diagnosis would ignore (the load, the server, the deployment: the run
holds what it was made with), so none is silently dropped. `--slo`, `--compare-run`,
`--html`, `--trace` and `--log` are used: `add_evidence` then copies the traces and logs
into the stored run (raw/traces/, raw/logs/, where a live run keeps its own), beside
what it holds already and never twice, so this map and every later `--from-run` read
them. A log is read over the run's own window, as for a live run.
"""

from __future__ import annotations

import contextlib
import filecmp
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from infertriage.analyze.server_log import unread_log
from infertriage.api.capture import check_files
from infertriage.api.runspans import add_given_spans
from infertriage.api.specs import ClientSpec, DiagnoseSpec
from infertriage.schemas import RunDir, UserError

__all__ = ["add_evidence", "evidence_added", "take_back"]

# the spec's fields that only a new run uses, by the flag that sets them
_NEW_RUN_ONLY = {
    "url": "--url",
    "scenario": "--scenario",
    "metrics_url": "--metrics-url",
    "dcgm_url": "--dcgm-url",
    "server_pid": "--server-pid",
    "prometheus": "--prometheus",
    "selector": "--selector",
    "duration_s": "--duration",
    "concurrency": "--concurrency",
    "workload": "--workload",
    "metrics_file": "--metrics-file",
    "profile_s": "--profile",
    "profile_dir": "--profile-dir",
    "locust_workers": "--locust-workers",
    "locust_master_host": "--locust-master-host",
    "out": "--out",
    "force": "--force",
    "nvidia_smi_topo": "--nvidia-smi-topo",
    "nccl_tests": "--nccl-tests",
    "otlp_listen": "--otlp-listen",
}
# the key and headers are not among them: OPENAI_API_KEY sets the key unasked
_CLIENT_ONLY = {
    "model": "--model",
    "endpoint": "--endpoint",
    "tokenizer": "--tokenizer",
    "max_model_len": "--max-model-len",
}
_DEPLOYMENT = {"model": "--model-config", "gpu": "--gpu"}  # and --tp, when not 1


def _default(model: type[DiagnoseSpec] | type[ClientSpec], name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


def _ignored_flags(spec: DiagnoseSpec) -> list[str]:
    """The flags given that `--from-run` would not use, in the order of `--help`."""
    flags = [
        flag
        for name, flag in _NEW_RUN_ONLY.items()
        if getattr(spec, name) != _default(DiagnoseSpec, name)
    ]
    flags += [
        flag
        for name, flag in _CLIENT_ONLY.items()
        if getattr(spec.client, name) != _default(ClientSpec, name)
    ]
    flags += [flag for key, flag in _DEPLOYMENT.items() if spec.deployment.get(key) is not None]
    if spec.deployment.get("tensor_parallel", 1) != 1:
        flags.append("--tp")
    return flags


def add_evidence(spec: DiagnoseSpec, run: RunDir) -> list[tuple[Path, Path]]:
    """Refuse, in one sentence, every option `--from-run` would ignore; then copy the
    `--trace` and `--log` files into the stored run, after what it holds (a file with the
    bytes of one there already is not added again). Gives each copy with its original, for
    `take_back` when they do not read."""
    flags = _ignored_flags(spec)
    if flags:
        them = "it" if len(flags) == 1 else "them"
        raise UserError(
            f"--from-run diagnoses the run as it was recorded, so it cannot use "
            f"{', '.join(flags)}: drop {them}, or run diagnose again without --from-run."
        )
    check_files(spec.traces, "--trace")
    check_files(spec.logs, "--log")
    unread = [said for said in map(unread_log, spec.logs) if said is not None]
    if unread:  # the evidence is all --log adds to a recorded run
        raise UserError(f"{unread[0]}: it would add no evidence to the run.")
    add_given_spans(spec.spans, run)  # --spans: a Collector's file export of the run's spans
    added: list[tuple[Path, Path]] = []
    for folder, paths in ((run.raw / "traces", spec.traces), (run.raw / "logs", spec.logs)):
        if paths:
            added += _add(folder, paths)
    return added


@contextlib.contextmanager
def evidence_added(spec: DiagnoseSpec, run: RunDir) -> Iterator[None]:
    """`add_evidence`, taken back (`take_back`) when what runs inside fails on the run."""
    added = add_evidence(spec, run)
    try:
        yield
    except UserError as err:
        raise take_back(added, err) from err


def take_back(added: Sequence[tuple[Path, Path]], err: UserError) -> UserError:
    """Remove the copies `add_evidence` made (they did not read, so the run stays as it was
    and a later `--from-run` of it works); the error, naming the user's files, not the copies."""
    _remove(added)
    message = str(err)
    for copy, original in added:
        message = message.replace(str(copy), str(original))
    return UserError(message)


def _remove(added: Sequence[tuple[Path, Path]]) -> None:
    for copy, _ in added:
        copy.unlink(missing_ok=True)


def _add(folder: Path, paths: Sequence[Path]) -> list[tuple[Path, Path]]:
    """Copy `paths` into `folder` whole or not at all (a copy cut by a full disk is removed)."""
    added: list[tuple[Path, Path]] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        kept = sorted(path for path in folder.iterdir() if path.is_file())
        for path in paths:
            if any(filecmp.cmp(path, old, shallow=False) for old in kept):
                continue
            target = folder / f"{len(kept):02d}-{path.name}"
            partial = folder / f".{target.name}.partial"
            try:
                shutil.copyfile(path, partial)
                partial.replace(target)
            finally:
                partial.unlink(missing_ok=True)
            kept.append(target)
            added.append((target, path))
    except OSError as err:
        _remove(added)
        raise UserError(f"cannot add {err.filename or folder} to the run: {err.strerror}.") from err
    return added
