"""api, level 5: the `topology` command — the measured interconnect against the TP degrees.

Takes a `TopologySpec`: the model and GPU, the planned batch, and files saved
from `nvidia-smi topo -m` and nccl-tests' `all_reduce_perf`; reads and parses
them (`plan.topology`), and gives a `TopologyReport`: the GPUs and their
links, each nccl-tests run, and for each TP degree whether the interconnect
carries the planned batch. `read_interconnect` is what `plan
--nvidia-smi-topo/--nccl-tests` shares with it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from infertriage.api.specs_offline import TopologySpec
from infertriage.plan import PlanInputs, get_gpu, load_model, normalize_dtype
from infertriage.plan.topology import (
    NcclRun,
    TopologyReport,
    TopoMatrix,
    parse_nccl_tests,
    parse_nvidia_smi_topo,
    tp_verdicts,
)
from infertriage.schemas import Thresholds, UserError
from infertriage.schemas.inputs import read_small_bytes

__all__ = [
    "Interconnect",
    "TopologyReport",
    "keep_interconnect",
    "kept_interconnect",
    "read_interconnect",
    "topology",
]

Interconnect = tuple[TopoMatrix | None, tuple[NcclRun, ...]]
_KEPT = "topology"  # under a run's raw/: the files `diagnose` was given, for --from-run
_TOPO_FILE = "nvidia-smi-topo.txt"
_MAX_SAVED_BYTES = 16 * 1024 * 1024  # a verbose nccl-tests log (NCCL_DEBUG=INFO) is a few MiB


def _read(path: Path, what: str) -> str:
    """The file's text, read at a bounded cost: /dev/zero or a FIFO is refused unread."""
    why = f"{what} output takes a few KiB, so it is likely the wrong file."
    data = read_small_bytes(path, f"the {what} file {path}", _MAX_SAVED_BYTES, why)
    return data.decode("utf-8", errors="replace")


def read_interconnect(
    topo_file: Path | None, nccl_files: tuple[Path, ...]
) -> tuple[TopoMatrix | None, tuple[NcclRun, ...]]:
    """The parsed `nvidia-smi topo -m` and nccl-tests files; one run per rank count."""
    topo = None
    if topo_file is not None:
        topo = parse_nvidia_smi_topo(_read(topo_file, "nvidia-smi topo"), topo_file.name)
    runs = tuple(parse_nccl_tests(_read(f, "nccl-tests"), f.name) for f in nccl_files)
    ranks = [run.num_ranks for run in runs]
    if len(set(ranks)) != len(ranks):
        raise UserError("give one nccl-tests run per rank count (two files have the same).")
    return topo, runs


def keep_interconnect(raw: Path, topo_file: Path | None, nccl_files: tuple[Path, ...]) -> None:
    """Read (a bad file fails first) and copy `diagnose`'s topology files into `raw`."""
    if topo_file is None and not nccl_files:
        return
    read_interconnect(topo_file, nccl_files)
    target = raw / _KEPT
    target.mkdir(parents=True, exist_ok=True)
    if topo_file is not None:
        shutil.copyfile(topo_file, target / _TOPO_FILE)
    for index, path in enumerate(nccl_files):
        shutil.copyfile(path, target / f"nccl-{index:02d}-{path.name}")


def kept_interconnect(raw: Path) -> Interconnect | None:
    """The measured interconnect a run was diagnosed with, or None."""
    folder = raw / _KEPT
    if not folder.is_dir():
        return None
    topo = folder / _TOPO_FILE
    nccl = tuple(sorted(folder.glob("nccl-*")))
    return read_interconnect(topo if topo.is_file() else None, nccl)


def topology(spec: TopologySpec) -> TopologyReport:
    """The `topology` command (module docstring)."""
    if spec.nvidia_smi_topo is None and not spec.nccl_tests:
        raise UserError("give --nvidia-smi-topo FILE, --nccl-tests FILE, or both.")
    topo, runs = read_interconnect(spec.nvidia_smi_topo, spec.nccl_tests)
    inputs = PlanInputs(
        model=load_model(spec.model),
        gpu=get_gpu(spec.gpu),
        max_model_len=spec.max_model_len,
        concurrency=spec.concurrency,
        input_len=spec.input_len,
        output_len=spec.output_len,
        dtype=normalize_dtype(spec.dtype),
    )
    limit = Thresholds().comm_share  # the share diagnose's parallelism rule calls a finding
    verdicts = tuple(tp_verdicts(inputs, topo, runs, limit))
    if not verdicts:
        raise UserError(
            f"{inputs.model.name}'s {inputs.model.num_attention_heads} attention heads divide "
            "by no TP degree these GPUs allow."
        )
    return TopologyReport(inputs, topo, runs, verdicts, limit)
