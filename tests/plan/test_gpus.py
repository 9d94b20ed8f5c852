"""plan.gpus: the GPU catalogue and its name lookup."""

from __future__ import annotations

import pytest

from infertriage.plan import get_gpu, list_gpus
from infertriage.schemas.errors import UserError

_ALL = [
    "A10G",
    "L4",
    "L40S",
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "B200",
    "MI300X",
]


def test_catalogue_lists_every_promised_gpu() -> None:
    assert set(_ALL) <= set(list_gpus())


@pytest.mark.parametrize(
    "spelling", ["H100", "h100-sxm", "H100_SXM", "h100 sxm", "NVIDIA H100 80GB HBM3"]
)
def test_lookup_is_tolerant(spelling: str) -> None:
    assert get_gpu(spelling).name == "H100-SXM"


def test_pcie_h100_is_its_own_row() -> None:
    gpu = get_gpu("h100-pcie")
    assert gpu.name == "H100-PCIe" and gpu.link == "pcie"


def test_unknown_gpu_lists_the_known_ones() -> None:
    with pytest.raises(UserError) as err:
        get_gpu("TPU-v5e")
    assert "H100-SXM" in str(err.value) and "MI300X" in str(err.value)


@pytest.mark.parametrize("name", _ALL)
def test_rows_are_consistent(name: str) -> None:
    gpu = get_gpu(name)
    assert gpu.source
    assert gpu.memory_bytes / 1024**3 == pytest.approx(gpu.memory_gib_marketed, rel=0.07)
    if gpu.fp8_flops_per_s is not None:
        assert gpu.fp8_flops_per_s >= gpu.bf16_flops_per_s
    assert gpu.link_bw_bytes_per_s >= gpu.pcie_bw_bytes_per_s
    assert (gpu.link == "pcie") == (gpu.link_bw_bytes_per_s == gpu.pcie_bw_bytes_per_s)


def test_dense_peaks_not_sparse() -> None:
    h100 = get_gpu("H100-SXM")
    assert h100.bf16_flops_per_s == pytest.approx(989.4e12)
    assert h100.fp8_flops_per_s == pytest.approx(1978.9e12)
    assert get_gpu("A100-80GB").bf16_flops_per_s == pytest.approx(312e12)


def test_no_fp8_before_hopper_and_ada() -> None:
    for name in ("A10G", "A100-40GB", "A100-80GB"):
        assert not get_gpu(name).has_fp8
    assert get_gpu("L4").has_fp8 and get_gpu("L40S").has_fp8
