"""plan, level 1: the measured interconnect — which tensor-parallel degrees it carries.

Takes the text of `nvidia-smi topo -m` (the GPU×GPU matrix: `X`, `NV#` for a
bonded set of # NVLinks, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`; written since
driver R450 the same way, R535 and later add a `GPU NUMA ID` column and NIC
rows) and of nccl-tests' `all_reduce_perf` (the table `size count type redop
[root] time algbw busbw #wrong|error time algbw busbw #wrong|error`, the
`root` column since nccl-tests 2.13, and the `# nccl-tests version` line since
2.14); gives, for each TP degree the GPUs allow, the best group's worst link,
the all-reduce time at the planned batch's message (measured: interpolated
between the sizes nccl-tests ran, log-log, by rank count) and its share of
the decode step, and whether the interconnect carries that degree (the share
within `Thresholds.comm_share`). `measured_gpu` gives the GPU spec whose link
bandwidth is the measured bus bandwidth at that message, for `plan`. Pure.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import re
from dataclasses import dataclass

from infertriage.plan.capacity import PlanInputs, make_capacity_plan
from infertriage.plan.gpus import GpuSpec
from infertriage.schemas.errors import UserError

__all__ = [
    "NcclRun",
    "NcclSize",
    "TopoMatrix",
    "TopologyReport",
    "TpVerdict",
    "allreduce_message_bytes",
    "measured_gpu",
    "parse_nccl_tests",
    "parse_nvidia_smi_topo",
    "tp_verdicts",
]

_GPU = re.compile(r"^GPU\d+$")
_NV = re.compile(r"^NV(\d+)$")
_PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")  # nearest first
_MAX_GPUS = 16  # groups are searched exhaustively


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """GPU-to-GPU links of one host, as `nvidia-smi topo -m` names them."""

    gpus: tuple[str, ...]
    links: dict[tuple[int, int], str]  # (i, j), i < j → 'NV18', 'PIX', 'SYS', …

    def link(self, i: int, j: int) -> str:
        return self.links[(min(i, j), max(i, j))]

    def nvlinks(self, i: int, j: int) -> int:
        match = _NV.match(self.link(i, j))
        return int(match[1]) if match else 0


def _cells(line: str) -> list[str]:
    """A row's cells: nvidia-smi separates them with tabs; spaced copies split on 2+ spaces."""
    parts = line.split("\t") if "\t" in line else re.split(r"\s{2,}|\s(?=\S)", line)
    return [part.strip() for part in parts if part.strip()]


def parse_nvidia_smi_topo(text: str, name: str = "nvidia-smi topo -m") -> TopoMatrix:
    """The GPU×GPU block of `nvidia-smi topo -m`; NIC rows and affinity columns are ignored."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if _cells(line)[:1] == ["GPU0"]), None)
    if header is None:
        raise UserError(f"{name} has no header row starting with GPU0: not `nvidia-smi topo -m`.")
    columns = [c for c in _cells(lines[header]) if _GPU.match(c)]
    rows: dict[str, list[str]] = {}
    for number, line in enumerate(lines[header + 1 :], start=header + 2):
        cells = _cells(line)
        if not cells or not _GPU.match(cells[0]):
            if rows:
                break
            continue
        if len(cells) < len(columns) + 1:
            raise UserError(f"{name} line {number}: {cells[0]} has fewer cells than GPUs.")
        rows[cells[0]] = cells[1 : len(columns) + 1]
    if [g for g in columns if g not in rows]:
        raise UserError(f"{name}: the matrix lacks rows for some of {', '.join(columns)}.")
    links = {}
    for i, j in itertools.combinations(range(len(columns)), 2):
        link = rows[columns[i]][j]
        if not (_NV.match(link) or link in _PCIE_PATHS):
            raise UserError(f"{name}: {columns[i]}–{columns[j]} is {link!r}, not a known link.")
        links[(i, j)] = link
    return TopoMatrix(tuple(columns), links)


@dataclass(frozen=True, slots=True)
class NcclSize:
    size_bytes: int
    time_s: float  # out-of-place
    busbw_bytes_per_s: float  # the better of out-of-place and in-place


@dataclass(frozen=True, slots=True)
class NcclRun:
    """One `all_reduce_perf` run: its ranks and bus bandwidth by message size."""

    num_ranks: int
    sizes: tuple[NcclSize, ...]
    version: str  # nccl-tests' own, when it printed it
    avg_busbw_bytes_per_s: float | None

    def time_at(self, size_bytes: int) -> float:
        """The all-reduce time at `size_bytes`: log-log between measured sizes; below the
        smallest, its time (latency-bound); above the largest, at its bus bandwidth."""
        sizes = [s.size_bytes for s in self.sizes]
        k = bisect.bisect_left(sizes, size_bytes)
        if k < len(sizes) and sizes[k] == size_bytes:
            return self.sizes[k].time_s
        if k == 0:
            return self.sizes[0].time_s
        if k == len(sizes):
            last = self.sizes[-1]
            return last.time_s * size_bytes / last.size_bytes
        low, high = self.sizes[k - 1], self.sizes[k]
        frac = math.log(size_bytes / low.size_bytes) / math.log(high.size_bytes / low.size_bytes)
        return math.exp(math.log(low.time_s) + frac * math.log(high.time_s / low.time_s))

    def busbw_at(self, size_bytes: int) -> float:
        """Bus bandwidth at `size_bytes` (nccl-tests' definition: algbw × 2(n−1)/n)."""
        n = self.num_ranks
        return size_bytes / self.time_at(size_bytes) * 2 * (n - 1) / n


def _header_columns(line: str) -> list[str] | None:
    tokens = line.lstrip("#").split()
    has_time = "time" in tokens or "cputime" in tokens
    if tokens[:2] == ["size", "count"] and tokens.count("busbw") == 2 and has_time:
        return tokens
    return None


def parse_nccl_tests(text: str, name: str = "all_reduce_perf") -> NcclRun:
    """The result table of one nccl-tests `all_reduce_perf` run (module docstring)."""
    columns: list[str] | None = None
    ranks = 0
    version, average = "", None
    sizes: list[NcclSize] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            columns = columns or _header_columns(stripped)
            ranks += 1 if re.match(r"#\s+Rank\s+\d+", stripped) else 0
            if found := re.match(r"#\s*nccl-tests version (\S+)", stripped):
                version = found[1]
            if found := re.match(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)", stripped):
                average = float(found[1]) * 1e9
            continue
        if not stripped or columns is None:
            continue
        sizes.append(_size_row(stripped.split(), columns, f"{name} line {number}"))
    if columns is None or not sizes:
        raise UserError(f"{name} holds no nccl-tests result table (size count type … busbw).")
    if "all_reduce" not in text and "sum" not in {c for c in text.split()}:
        raise UserError(f"{name} is not an all_reduce_perf run.")
    sizes.sort(key=lambda s: s.size_bytes)
    return NcclRun(max(ranks, 2), tuple(sizes), version, average)


def _size_row(cells: list[str], columns: list[str], where: str) -> NcclSize:
    if len(cells) < len(columns):
        raise UserError(f"{where}: {len(cells)} cells where the header has {len(columns)}.")
    time_at = next(i for i, c in enumerate(columns) if c in {"time", "cputime"})
    busbw = [i for i, c in enumerate(columns) if c == "busbw"]
    try:
        size = int(cells[0])
        time_s = float(cells[time_at]) * 1e-6
        bandwidths = [float(cells[i]) * 1e9 for i in busbw]
    except ValueError:
        raise UserError(f"{where}: {' '.join(cells)[:80]!r} is not a result row.") from None
    if size <= 0 or time_s <= 0:
        raise UserError(f"{where}: size and time must be positive.")
    return NcclSize(size, time_s, max(bandwidths))


# --- what the interconnect carries --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TpVerdict:
    tp: int
    gpus: tuple[str, ...]  # the best group of `tp` GPUs on this host (topology), or ()
    link: str  # that group's worst link ('NV18', 'SYS', …), or '' without a topology
    message_bytes: int  # one all-reduce of the planned batch's hidden states
    allreduce_s: float | None  # measured (nccl-tests), or None
    measured_ranks: int | None  # the nccl-tests run it came from
    step_s: float  # the decode step at this TP, the all-reduces included
    comm_share: float  # of the decode step
    carries: bool
    reason: str


@dataclass(frozen=True, slots=True)
class TopologyReport:
    """The `topology` command's result: what was read and the verdict per TP degree."""

    inputs: PlanInputs
    topo: TopoMatrix | None
    runs: tuple[NcclRun, ...]
    verdicts: tuple[TpVerdict, ...]
    comm_share_limit: float


def allreduce_message_bytes(inputs: PlanInputs, batch: int) -> int:
    """Bytes of one decode all-reduce: the batch's hidden states (activation dtype)."""
    return batch * inputs.model.hidden_size * inputs.cost_params.activation_bytes


def _best_group(topo: TopoMatrix, tp: int) -> tuple[tuple[int, ...], str] | None:
    """The `tp` GPUs whose weakest link is strongest: most NVLinks, else the nearest PCIe."""

    def strength(link: str) -> tuple[int, int]:
        match = _NV.match(link)
        return (1, int(match[1])) if match else (0, -_PCIE_PATHS.index(link))

    best: tuple[tuple[int, int], tuple[int, ...]] | None = None
    for group in itertools.combinations(range(len(topo.gpus)), tp):
        weakest = min(strength(topo.link(i, j)) for i, j in itertools.combinations(group, 2))
        if best is None or weakest > best[0]:
            best = (weakest, group)
    if best is None:
        return None
    group = best[1]
    weakest_link = min((topo.link(i, j) for i, j in itertools.combinations(group, 2)), key=strength)
    return group, weakest_link


def _run_for(runs: tuple[NcclRun, ...], tp: int) -> NcclRun | None:
    exact = [r for r in runs if r.num_ranks == tp]
    return exact[0] if exact else None


def _verdict(
    inputs: PlanInputs,
    tp: int,
    group: tuple[tuple[str, ...], str],
    run: NcclRun | None,
    comm_share_limit: float,
) -> TpVerdict:
    over_pcie = bool(group[1]) and not _NV.match(group[1])
    link = "pcie" if over_pcie else inputs.interconnect
    plan = make_capacity_plan(inputs.replace(tp=tp, pp=1, interconnect=link))
    batch = plan.roofline.batch_size
    decode = plan.roofline.decode
    message = allreduce_message_bytes(inputs, batch)
    compute_s = decode.total_s - decode.comm_s
    measured = run.time_at(message) if run is not None else None
    comm_s = 2 * inputs.model.num_layers * measured if measured is not None else decode.comm_s
    step_s = compute_s + comm_s
    share = comm_s / step_s if step_s > 0 else 0.0
    source = f"measured on {run.num_ranks} ranks" if run is not None else "catalogue link"
    carries = share <= comm_share_limit
    reason = (
        f"all-reduce of {message / 1024:,.0f} KiB ×{2 * inputs.model.num_layers} per step "
        f"({source}) is {share:.0%} of the decode step at batch {batch}"
        f"{'' if carries else f', above {comm_share_limit:.0%}'}"
    )
    if over_pcie:
        reason += f"; the group's weakest link is {group[1]} (PCIe, no NVLink)"
    return TpVerdict(
        tp,
        group[0],
        group[1],
        message,
        measured,
        run.num_ranks if run else None,
        step_s,
        share,
        carries,
        reason,
    )


def tp_verdicts(
    inputs: PlanInputs,
    topo: TopoMatrix | None,
    runs: tuple[NcclRun, ...],
    comm_share_limit: float,
) -> list[TpVerdict]:
    """For each TP degree (2, 4, 8, … up to the GPUs known) whether the interconnect carries
    `inputs`' planned batch: the all-reduces' share of the decode step within the limit."""
    count = len(topo.gpus) if topo is not None else max((r.num_ranks for r in runs), default=0)
    if count < 2:
        raise UserError("give a topology of two or more GPUs, or an nccl-tests run of 2+ ranks.")
    if topo is not None and len(topo.gpus) > _MAX_GPUS:
        raise UserError(f"the topology has {len(topo.gpus)} GPUs; at most {_MAX_GPUS} are read.")
    heads = inputs.model.num_attention_heads
    verdicts = []
    for tp in (2**k for k in range(1, 5)):
        if tp > count or heads % tp:
            continue
        group: tuple[tuple[str, ...], str] = ((), "")
        if topo is not None:
            found = _best_group(topo, tp)
            if found is not None:
                group = (tuple(topo.gpus[i] for i in found[0]), found[1])
        verdicts.append(_verdict(inputs, tp, group, _run_for(runs, tp), comm_share_limit))
    return verdicts


def measured_gpu(inputs: PlanInputs, runs: tuple[NcclRun, ...], topo: TopoMatrix | None) -> GpuSpec:
    """The GPU spec `plan` uses: its GPU link bandwidth the measured bus bandwidth at the
    planned batch's all-reduce (from the run on `inputs.tp` ranks, else the nearest), and
    its link PCIe when the topology shows no NVLink between the GPUs."""
    gpu = inputs.gpu
    if topo is not None and not any(_NV.match(link) for link in topo.links.values()):
        gpu = dataclasses.replace(gpu, link="pcie")
    if runs:
        run = _run_for(runs, inputs.tp) or min(runs, key=lambda r: abs(r.num_ranks - inputs.tp))
        plan = make_capacity_plan(inputs)
        busbw = run.busbw_at(allreduce_message_bytes(inputs, plan.roofline.batch_size))
        if gpu.link == "pcie":
            gpu = dataclasses.replace(gpu, pcie_bw_bytes_per_s=busbw)
        else:
            gpu = dataclasses.replace(gpu, link_bw_bytes_per_s=busbw)
    return gpu
