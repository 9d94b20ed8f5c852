"""Kernel and API names: categories, attention backends, launch and sync calls."""

from __future__ import annotations

import pytest

from infertriage.analyze.trace.names import (
    ATTENTION_BACKENDS,
    Category,
    attention_backend_of,
    category_of,
    is_graph_launch,
    is_launch,
    is_sync,
)

CATEGORIES = [
    # communication: old and new NCCL, RCCL, vLLM's custom all-reduce
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", Category.COMMUNICATION),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, ncclWork*)", Category.COMMUNICATION),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", Category.COMMUNICATION),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>", Category.COMMUNICATION),
    ("rcclKernel_AllReduce_RING_LL_Sum_half", Category.COMMUNICATION),
    # GEMM: cuBLAS, CUTLASS, Hopper nvjet, ROCm Tensile, Triton templates, convolution
    ("ampere_sgemm_32x32_sliced1x4_tn", Category.GEMM),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", Category.GEMM),
    ("nvjet_tst_128x64_64x8_1x2_h_bz_coopA_NTN", Category.GEMM),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1", Category.GEMM),
    ("triton_tem_fused_mm_0", Category.GEMM),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32", Category.GEMM),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x128_32x4>", Category.GEMM),
    # attention
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>", Category.ATTENTION),
    ("void vllm::paged_attention_v2_kernel<unsigned short, 128, 16>", Category.ATTENTION),
    # elementwise and normalisation, Triton pointwise, ROCm copies
    ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>", Category.ELEMENTWISE),
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, int)", Category.ELEMENTWISE),
    ("triton_poi_fused_add_cos_sin_0", Category.ELEMENTWISE),
    ("triton_red_fused__to_copy_mean_pow_1", Category.ELEMENTWISE),
    ("void at::native::softmax_warp_forward<float, float, float, 10>", Category.ELEMENTWISE),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512>", Category.ELEMENTWISE),
    ("par_ranged1d_kernel", Category.OTHER),
]  # fmt: skip

BACKENDS = [
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>", "flash_attn_2"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "flash_attn_2"),
    ("cutlass::device_kernel<flash::enable_sm90_or_later<FlashAttnFwdSm90<>>>", "flash_attn_3"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<true, 1, 4, 8>", "flashinfer"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<1, 128>", "flashinfer"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention)", "xformers"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128", "cudnn_sdpa"),
    ("void vllm::paged_attention_v1_kernel<unsigned short, 128, 16, 128>", "paged_attention"),
    ("kernel_unified_attention_2d", "triton"),
    ("fmha_v2_flash_attention_fp16_64_32_S_128_sm80_kernel", "trtllm"),
    ("ck_fmha_fwd_d128_bf16_batch", "rocm_ck"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "category"), CATEGORIES)
def test_category(name: str, category: Category) -> None:
    assert category_of(name) is category


@pytest.mark.parametrize(("name", "backend"), BACKENDS)
def test_attention_backend(name: str, backend: str) -> None:
    assert backend in ATTENTION_BACKENDS
    assert attention_backend_of(name) == backend
    assert category_of(name) is Category.ATTENTION


def test_gemm_is_no_attention() -> None:
    assert attention_backend_of("ampere_sgemm_128x64_nn") is None


@pytest.mark.parametrize(
    "name",
    [
        "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernel_v7000", "cuLaunchKernel",
        "cuLaunchKernelEx", "hipLaunchKernel", "hipExtModuleLaunchKernel", "cudaGraphLaunch",
        "cudaMemcpyAsync", "cudaMemsetAsync", "hipMemcpyWithStream",
    ],
)  # fmt: skip
def test_launch_calls(name: str) -> None:
    assert is_launch(name)


def test_graph_and_sync_calls() -> None:
    assert is_graph_launch("cudaGraphLaunch") and is_graph_launch("cudaGraphLaunch_v10000")
    assert is_graph_launch("hipGraphLaunch") and not is_graph_launch("cudaLaunchKernel")
    for name in ("cudaDeviceSynchronize_v3020", "cudaStreamSynchronize", "hipDeviceSynchronize"):
        assert is_sync(name), name
    for name in ("cudaStreamWaitEvent", "cudaEventQuery", "cudaEventRecord"):
        assert not is_sync(name), name


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("NCCLKERNEL_ALLREDUCE_SUM", Category.COMMUNICATION),  # any case, ASCII
        ("Paged_Attention_Kernel", Category.ATTENTION),
        ("AMPERE_SGEMM_128X64_NN", Category.GEMM),
        ("RMS_NORM_KERNEL", Category.ELEMENTWISE),
        ("ncclKernel_AllReduce·µ", Category.COMMUNICATION),  # not ASCII: the same matches
        ("\u017foftmax_warp_forward", Category.ELEMENTWISE),  # long s: an s, case-folded
        ("\u212aernel_blob", Category.OTHER),  # Kelvin sign, nothing matched
        ("gemm_\u00e9t\u00e9", Category.GEMM),
    ],
)
def test_category_ignores_case_for_every_name(name: str, category: Category) -> None:
    assert category_of(name) is category
