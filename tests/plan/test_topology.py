"""plan.topology on outputs in the tools' documented formats (tests/data/topology/README.md):
nvidia-smi topo -m (R535+ and R470-era layouts) and nccl-tests all_reduce_perf (2.17 with
its version line and root column; the older table without them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.plan import PlanInputs, get_gpu, load_model, make_capacity_plan
from infertriage.plan.topology import (
    allreduce_message_bytes,
    measured_gpu,
    parse_nccl_tests,
    parse_nvidia_smi_topo,
    tp_verdicts,
)
from infertriage.schemas import Thresholds, UserError

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
LIMIT = Thresholds().comm_share


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


H100_TOPO = parse_nvidia_smi_topo(_text("nvidia_smi_topo_h100x8_nvswitch.txt"))
BRIDGED = parse_nvidia_smi_topo(_text("nvidia_smi_topo_a100pcie_x4_bridged.txt"))
H100_NCCL = parse_nccl_tests(_text("all_reduce_perf_h100x8_nvlink.txt"))
L4_NCCL = parse_nccl_tests(_text("all_reduce_perf_l4x2_pcie.txt"))
LLAMA_70B = PlanInputs(
    model=load_model("llama-3.1-70b"),
    gpu=get_gpu("H100-SXM"),
    max_model_len=8192,
    concurrency=64,
    input_len=1024,
    output_len=256,
    tp=8,
)


def test_the_r535_matrix_reads_gpus_and_links_not_nics_or_affinity() -> None:
    assert H100_TOPO.gpus == tuple(f"GPU{i}" for i in range(8))
    assert {link for link in H100_TOPO.links.values()} == {"NV18"}
    assert len(H100_TOPO.links) == 28 and H100_TOPO.nvlinks(3, 6) == 18


def test_the_older_layout_with_bridged_pairs() -> None:
    assert BRIDGED.gpus == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert BRIDGED.link(0, 1) == BRIDGED.link(3, 2) == "NV12"
    assert BRIDGED.link(1, 2) == "SYS" and BRIDGED.nvlinks(0, 3) == 0


def test_nccl_tests_2_17_table_with_version_and_root() -> None:
    run = H100_NCCL
    assert (run.num_ranks, run.version, len(run.sizes)) == (8, "2.17.9", 11)
    first, last = run.sizes[0], run.sizes[-1]
    assert (first.size_bytes, first.time_s) == (1024, pytest.approx(18.00e-6))
    assert last.busbw_bytes_per_s == pytest.approx(472.62e9)  # the in-place column is better
    assert run.avg_busbw_bytes_per_s == pytest.approx(187.958e9, rel=1e-4)
    # bus bandwidth recomputed from the time agrees with the table's own busbw
    assert run.busbw_at(268435456) == pytest.approx(461.69e9, rel=2e-3)


def test_the_older_nccl_tests_table_without_root_or_version() -> None:
    assert (L4_NCCL.num_ranks, L4_NCCL.version) == (2, "")
    assert L4_NCCL.sizes[-1].busbw_bytes_per_s == pytest.approx(11.0e9, rel=0.02)


def test_time_between_sizes_is_interpolated_log_log_and_clamped() -> None:
    run = H100_NCCL
    assert run.time_at(1024) == run.sizes[0].time_s
    assert run.time_at(8) == run.sizes[0].time_s  # below the table: its latency
    between = run.time_at(2 * 1024**2)
    assert run.time_at(1024**2) < between < run.time_at(4 * 1024**2)
    assert run.time_at(4 * 1024**3) == pytest.approx(4 * run.sizes[-1].time_s)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nothing here\n", "no header row starting with GPU0"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\n", "fewer cells than GPUs"),
        ("\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tQPI\t X \n", "'QPI', not a known link"),
    ],
)
def test_a_bad_topology_is_one_sentence(text: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        parse_nvidia_smi_topo(text, "topo.txt")


def test_a_file_without_a_result_table_is_refused() -> None:
    with pytest.raises(UserError, match="no nccl-tests result table"):
        parse_nccl_tests("# nThread 1 nGpus 2\n# Out of bounds values : 0 OK\n", "x.txt")
    broken = _text("all_reduce_perf_l4x2_pcie.txt").replace("    30.09", "    3O.09", 1)
    with pytest.raises(UserError, match="line 10"):
        parse_nccl_tests(broken, "x.txt")


def test_the_verdicts_use_the_measured_all_reduce_and_the_best_group() -> None:
    verdicts = {v.tp: v for v in tp_verdicts(LLAMA_70B, H100_TOPO, (H100_NCCL,), LIMIT)}
    assert set(verdicts) == {2, 4, 8}
    eight = verdicts[8]
    plan = make_capacity_plan(LLAMA_70B)
    assert eight.message_bytes == allreduce_message_bytes(LLAMA_70B, plan.roofline.batch_size)
    assert eight.allreduce_s == pytest.approx(H100_NCCL.time_at(eight.message_bytes))
    comm = 2 * LLAMA_70B.model.num_layers * eight.allreduce_s
    assert eight.comm_share == pytest.approx(comm / eight.step_s)
    assert eight.link == "NV18" and eight.measured_ranks == 8
    assert verdicts[2].allreduce_s is None and "catalogue link" in verdicts[2].reason


def test_tp_across_pcie_pairs_is_flagged_and_can_fail_the_limit() -> None:
    inputs = LLAMA_70B.replace(gpu=get_gpu("A100-80GB"), tp=4, dtype="fp8")
    verdicts = {v.tp: v for v in tp_verdicts(inputs, BRIDGED, (), LIMIT)}
    assert verdicts[2].gpus == ("GPU0", "GPU1") and verdicts[2].link == "NV12"
    assert verdicts[4].link == "SYS" and "PCIe, no NVLink" in verdicts[4].reason
    assert verdicts[4].comm_share > verdicts[2].comm_share
    strict = {v.tp: v for v in tp_verdicts(inputs, BRIDGED, (), verdicts[2].comm_share)}
    assert strict[2].carries and not strict[4].carries


def test_plan_takes_the_measured_bus_bandwidth() -> None:
    gpu = measured_gpu(LLAMA_70B, (H100_NCCL,), H100_TOPO)
    batch = make_capacity_plan(LLAMA_70B).roofline.batch_size
    message = allreduce_message_bytes(LLAMA_70B, batch)
    assert gpu.link == "nvlink"
    assert gpu.link_bw_bytes_per_s == pytest.approx(H100_NCCL.busbw_at(message))
    assert gpu.link_bw_bytes_per_s < LLAMA_70B.gpu.link_bw_bytes_per_s  # 1 MiB is not peak
    slower = make_capacity_plan(LLAMA_70B.replace(gpu=gpu)).roofline
    assert slower.decode.comm_s > make_capacity_plan(LLAMA_70B).roofline.decode.comm_s
    pcie = measured_gpu(LLAMA_70B.replace(tp=2), (L4_NCCL,), parse_nvidia_smi_topo(
        "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n"))  # fmt: skip
    assert pcie.link == "pcie" and pcie.pcie_bw_bytes_per_s < 11e9
