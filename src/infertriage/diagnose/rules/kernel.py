"""diagnose, level 3: kernel-layer rules — launches, CUDA graphs, attention, recompiles, syncs.

From a trace (`trace.*`), and from what the engine's own log says: decode steps that ran
outside CUDA graphs (SGLang's per-step lines), graphs turned off at start-up, and an
attention kernel the engine fell back from at start-up (vLLM's selector, TGI's flash import).
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.symptom import engine_flag, itl_missed, slo_missed
from infertriage.engines import AttentionFallback, Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.KERNEL


def _graphs_unused(ev: Evidence, t: Thresholds) -> str:
    """How CUDA graphs are off: "off" (the server says so), "not used" (the trace's kernels
    ran outside graphs: off, or a batch beyond the capture sizes), or "" when in use."""
    reported = ev.get("config.cuda_graphs")
    if reported is not None and reported < 1:
        return "off"
    if (ev.get("trace.cuda_graph_fraction") or 0.0) < t.cuda_graph_fraction_on:
        return "off" if reported is None else "not used"
    return ""


def roofline_gap_explained(ev: Evidence, idle: float) -> float | None:
    """The share of the gap to the roofline that `idle` GPU time explains: removing it
    would raise throughput by 1/(1 − idle), up to the roofline. None without a roofline."""
    measured = ev.get("client.throughput_tok_s")
    ceiling = ev.get("plan.throughput_roofline_tok_s")
    if measured is None or not ceiling or measured >= ceiling or idle >= 1:
        return None
    return (min(measured / (1 - idle), ceiling) - measured) / (ceiling - measured)


def _graphs_on(ev: Evidence) -> str:
    eager = engine_flag(ev, Knob.EAGER)
    if eager is None:  # the engine is not known: the two that have such a flag
        return (
            "turn CUDA graphs on: drop `--enforce-eager` (vLLM) / `--disable-cuda-graph` (SGLang)"
        )
    return f"turn CUDA graphs on: drop `{eager}`"


@rule(
    "kernel.launch_bound",
    _L,
    ("trace.launch_gap_fraction", "trace.cuda_graph_fraction", "trace.kernels_per_step"),
)
def launch_bound(ev: Evidence, t: Thresholds) -> Finding | None:
    """CUDA graphs off and the GPU idle between kernels: the seeds' case study.

    A bottleneck when an SLO is missed, when the idle time explains at least
    `launch_gap_roofline_share` of the gap to the roofline, or when it reaches
    `launch_bound_fraction` of the GPU's time; otherwise a warning.
    """
    gaps = ev.get("trace.launch_gap_fraction") or 0.0
    unused = _graphs_unused(ev, t)
    if gaps < t.launch_gap_fraction or not unused:
        return None
    kernels = ev.get("trace.kernels_per_step") or 0.0
    explained = roofline_gap_explained(ev, gaps)
    bottleneck = (
        slo_missed(ev, t)
        or gaps >= t.launch_bound_fraction
        or (explained is not None and explained >= t.launch_gap_roofline_share)
    )
    share = "" if explained is None else f", {explained:.0%} of the gap to the roofline"
    return make_finding(
        "kernel.launch_bound",
        _L,
        bottleneck=bottleneck,
        severity=severity_above(gaps, t.launch_gap_fraction, 0.8),
        explains=gaps if explained is None else max(gaps, explained),
        title=(
            f"CUDA graphs {unused}: {kernels:.0f} kernels per step launched one by one, the GPU "
            f"idle {gaps:.0%} of its time between them{share}"
        ),
        evidence=ev,
        used=(
            ("trace.launch_gap_fraction", t.launch_gap_fraction),
            ("trace.cuda_graph_fraction", t.cuda_graph_fraction_on),
        ),
        explanation=(
            "Without CUDA graphs every kernel pays a host launch; small decode kernels finish "
            "before the next launch arrives, so the GPU waits on the CPU. GPU 'utilisation' "
            "counts that time as busy."
        ),
        next_steps=(
            _graphs_on(ev),
            "widen the capture sizes (`--cuda-graph-sizes`) to cover the running batch",
        ),
    )


@rule("kernel.unfused_attention", _L, ("trace.attention_unfused",))
def unfused_attention(ev: Evidence, t: Thresholds) -> Finding | None:
    if (ev.get("trace.attention_unfused") or 0.0) < 1:
        return None
    return make_finding(
        "kernel.unfused_attention",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=0.7,
        explains=0.5,
        title="attention runs the unfused math path",
        evidence=ev,
        used=(("trace.attention_unfused", 0.0),),
        explanation="Materialising the score matrix moves far more bytes than a fused kernel.",
        next_steps=("select a fused backend (`VLLM_ATTENTION_BACKEND=FLASH_ATTN` or FLASHINFER)",),
    )


@rule("kernel.recompilations", _L, ("trace.recompilations",))
def recompilations(ev: Evidence, t: Thresholds) -> Finding | None:
    count = ev.get("trace.recompilations") or 0.0
    if count < t.recompilations:
        return None
    return make_finding(
        "kernel.recompilations",
        _L,
        bottleneck=False,
        severity=severity_above(count, 0, t.recompilations_full),
        explains=0.3,
        title=f"torch.compile recompiled {count:.0f} times",
        evidence=ev,
        used=(("trace.recompilations", t.recompilations),),
        explanation="Each recompilation stalls the engine for seconds.",
        next_steps=(
            "mark dynamic dimensions (`torch._dynamo.mark_dynamic`) and fix the capture sizes",
        ),
    )


@rule("kernel.host_wait", _L, ("trace.host_wait_fraction",))
def host_wait(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.host_wait_fraction") or 0.0
    if share < t.host_wait_fraction:
        return None
    return make_finding(
        "kernel.host_wait",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, t.host_wait_fraction, 0.8),
        explains=share,
        title=f"the GPU waits on the host {share:.0%} of the time",
        evidence=ev,
        used=(("trace.host_wait_fraction", t.host_wait_fraction),),
        explanation=(
            "Idle time with no kernel queued: the CPU side (scheduling, sampling, or an API "
            "server sharing the engine's process or host) is late."
        ),
        next_steps=(
            "look at the scheduling layer's engine-loop CPU; enable async scheduling",
            "look at the application layer's API-server CPU per streamed token",
        ),
    )


@rule("kernel.sync_every_step", _L, ("trace.syncs_per_step",))
def sync_every_step(ev: Evidence, t: Thresholds) -> Finding | None:
    syncs = ev.get("trace.syncs_per_step") or 0.0
    if syncs < t.syncs_per_step:  # one per step is the sampler's (see Thresholds)
        return None
    return make_finding(
        "kernel.sync_every_step",
        _L,
        bottleneck=False,
        severity=severity_above(syncs, t.syncs_per_step, 10),
        explains=0.2,
        title=f"{syncs:.1f} device synchronisations per step",
        evidence=ev,
        used=(("trace.syncs_per_step", t.syncs_per_step),),
        explanation="A synchronisation drains the GPU queue and serialises host and device.",
        next_steps=("remove `.item()`/`.cpu()` calls from the step; use non-blocking copies",),
    )


@rule(
    "kernel.short_kernels",
    _L,
    ("trace.short_kernel_fraction", "trace.cuda_graph_fraction", "trace.gpu_idle_fraction"),
)
def short_kernels(ev: Evidence, t: Thresholds) -> Finding | None:
    """Most launches finish on the GPU before the host has launched the next, outside graphs.

    A warning: when the GPU is idle between them `kernel.launch_bound` says so.
    """
    short = ev.get("trace.short_kernel_fraction") or 0.0
    graphs = ev.get("trace.cuda_graph_fraction") or 0.0
    if short < t.short_kernel_fraction or graphs >= short:
        return None
    return make_finding(
        "kernel.short_kernels",
        _L,
        bottleneck=False,
        severity=severity_above(short, t.short_kernel_fraction, 1.0),
        explains=ev.get("trace.gpu_idle_fraction") or 0.0,
        title=f"{short:.0%} of kernels run shorter than their launch call",
        evidence=ev,
        used=(
            ("trace.short_kernel_fraction", t.short_kernel_fraction),
            ("trace.cuda_graph_fraction", None),
            ("trace.gpu_idle_fraction", None),
        ),
        explanation=(
            "When a kernel takes less GPU time than the CPU needs to launch it, launch overhead "
            "sets the pace; CUDA graphs or fusion (torch.compile) remove it."
        ),
        next_steps=(
            "turn CUDA graphs on: drop `--enforce-eager` (vLLM) / `--disable-cuda-graph` (SGLang)",
            "fuse small ops (torch.compile, fused kernels)",
        ),
    )


def _above_captured(ev: Evidence) -> float | None:
    """The largest batch the start-up captured in a graph (SGLang's `cuda_graph_max_bs`)
    when the eager steps ran above it — eager by design; None otherwise."""
    captured = ev.get("config.cuda_graph_max_batch")
    batch = ev.get("log.eager_decode_batch")
    return captured if captured is not None and batch is not None and batch > captured else None


def _eager_costs(ev: Evidence, t: Thresholds) -> bool:
    """Whether the eager lines can be the cause of a missed ITL: the SLO missed, the eager
    steps short (`eager_decode_step_s`), enough of them (`eager_decode_min_lines`), no
    data-parallel attention (a rank's step runs eagerly whenever another rank prefills) and
    no trace to measure it (`kernel.launch_bound` decides then)."""
    step_s = ev.get("log.eager_decode_step_s")
    return (
        itl_missed(ev, t)
        and step_s is not None
        and step_s <= t.eager_decode_step_s
        and (ev.get("log.eager_decode_lines") or 0.0) >= t.eager_decode_min_lines
        and (ev.get("log.eager_decode_ranked") or 0.0) < 1
        and not ev.has("trace.cuda_graph_fraction")
    )


def _eager_next_steps(ev: Evidence, t: Thresholds) -> tuple[str, ...]:
    widen = engine_flag(ev, Knob.CUDA_GRAPH_MAX_BATCH)
    batch = ev.get("log.eager_decode_batch")
    at = "" if batch is None else f" (eager at {batch:.0f} requests)"
    confirm = (
        "confirm the cost with a trace (`--profile 5`): `kernel.launch_bound` measures the "
        "GPU's idle time between launches"
    )
    raise_it = (
        f"capture graphs up to the running batch: raise `{widen}`{at}"
        if widen
        else f"capture graphs up to the running batch{at}"
    )
    if _above_captured(ev) is not None:  # by design: worth changing only for a missed ITL
        return (raise_it, confirm) if itl_missed(ev, t) else (confirm,)
    if (ev.get("log.eager_decode_ranked") or 0.0) >= 1:  # DP attention: by design too
        return (confirm,)
    graphs = ev.get("config.cuda_graphs")
    off = () if graphs is not None and graphs >= 1 else (_graphs_on(ev) + " if it is set",)
    return (*off, raise_it, confirm)


def _eager_title(ev: Evidence, share: float) -> str:
    batch = ev.get("log.eager_decode_batch")
    token_s = ev.get("log.eager_decode_token_s")
    captured = _above_captured(ev)
    at = "" if batch is None else f" at {batch:.0f} requests running"
    every = "" if token_s is None else f", a token every {token_s * 1e3:.0f} ms per request"
    design = (
        f": above the largest batch captured in a graph ({captured:.0f}), eager by design"
        if captured is not None
        else ": data-parallel attention (a rank steps eagerly while another prefills)"
        if (ev.get("log.eager_decode_ranked") or 0.0) >= 1
        else ""
    )
    return f"{share:.0%} of the decode steps ran outside CUDA graphs{at}{every}{design}"


@rule("kernel.eager_decode", _L, ("log.eager_decode_share",))
def eager_decode(ev: Evidence, t: Thresholds) -> Finding | None:
    """Decode steps ran outside CUDA graphs, as the engine's own per-step lines say.

    SGLang's `Decode batch` lines say `cuda graph: False` when a step ran eagerly: graphs
    off (`--disable-cuda-graph`), a batch above the largest captured (`--cuda-graph-max-bs`,
    160 by default, 8 on small GPUs: eager there by design), a rank of data-parallel
    attention while another prefills, or a mode with no graph captured. A finding when
    `eager_decode_share` of the lines with requests running say so. A warning unless it can
    be the cause of a missed ITL (`_eager_costs`: the SLO missed, the eager steps short —
    `eager_decode_step_s` or less, where a step pays its hundreds of host launches as a
    large share of its time — at least `eager_decode_min_lines` of them, no data-parallel
    ranks, no trace that measures it) and the batch is not above the captured sizes the
    start-up states. A healthy run steps eagerly in 15–25 ms at large batches: no symptom,
    no bottleneck. The lines state the mode, not the time lost: it explains little beside
    a measured cause (a trace measures it: `kernel.launch_bound`).
    """
    share = ev.get("log.eager_decode_share") or 0.0
    if share < t.eager_decode_share:
        return None
    bottleneck = _eager_costs(ev, t) and _above_captured(ev) is None
    return make_finding(
        "kernel.eager_decode",
        _L,
        bottleneck=bottleneck,
        severity=share,
        explains=0.2 if bottleneck else 0.1,
        title=_eager_title(ev, share),
        evidence=ev,
        used=(
            ("log.eager_decode_share", t.eager_decode_share),
            ("log.eager_decode_step_s", t.eager_decode_step_s),
            ("log.eager_decode_lines", t.eager_decode_min_lines),
            ("log.eager_decode_batch", None),
            ("config.cuda_graph_max_batch", None),
        ),
        explanation=(
            "Outside a CUDA graph the host launches every kernel of the step one by one; a "
            "decode step's small kernels finish before the next launch arrives, so the GPU "
            "waits on the CPU. The engine captures graphs only up to its largest captured "
            "batch, and none with graphs turned off."
        ),
        next_steps=_eager_next_steps(ev, t),
    )


@rule("kernel.graphs_off", _L, ("config.cuda_graphs",))
def graphs_off(ev: Evidence, t: Thresholds) -> Finding | None:
    """The server's start-up says CUDA graphs are off (`enforce_eager=True`,
    `disable_cuda_graph=True`), and no per-step line or trace says what it cost.

    Always a warning: many servers run eager and meet their SLOs (a debug setting left on,
    a model whose graphs fail to capture); the setting alone is no sign of slowness. Per-step
    lines (`kernel.eager_decode`) or a trace (`kernel.launch_bound`) judge it where present.
    """
    graphs = ev.get("config.cuda_graphs")
    judged = ev.has("log.eager_decode_share") or ev.has("trace.cuda_graph_fraction")
    if graphs is None or graphs >= 1 or judged:
        return None
    return make_finding(
        "kernel.graphs_off",
        _L,
        bottleneck=False,
        severity=0.6 if itl_missed(ev, t) else 0.3,
        explains=0.2,
        title="CUDA graphs are off (the server's start-up says so): every decode kernel is "
        "launched from the host",
        evidence=ev,
        used=(("config.cuda_graphs", 1.0),),
        explanation=(
            "Without CUDA graphs each decode step pays a host launch per kernel; at small "
            "batches that can be a large share of the step. The setting alone does not say "
            "how much it cost here."
        ),
        next_steps=(
            _graphs_on(ev),
            "measure the cost: a trace (`--profile 5`) shows the GPU's idle time between "
            "launches (`kernel.launch_bound`)",
        ),
    )


# why the flash kernel was left (`AttentionFallback`), as a title says it
_FALLBACK_WHY = {
    AttentionFallback.GPU: "the GPU has no such kernel",
    AttentionFallback.DTYPE: "the model's dtype is neither float16 nor bfloat16",
    AttentionFallback.KV_CACHE_DTYPE: "the KV cache is FP8",
    AttentionFallback.BLOCK_SIZE: "the KV block size is not one the kernel takes",
    AttentionFallback.SLIDING_WINDOW: "the model uses a sliding window",
    AttentionFallback.HEAD_SIZE: "the model's head size is not one the kernel takes",
    AttentionFallback.NOT_AVAILABLE: "its package is missing or failed to import",
}


def _fallback_reason(ev: Evidence) -> AttentionFallback | None:
    code = ev.get("log.attention_fallback_reason")
    known = {float(member): member for member in AttentionFallback}
    return None if code is None else known.get(code)


def _fallback_why(ev: Evidence, reason: AttentionFallback | None) -> str:
    capability = ev.get("log.gpu_capability")
    if reason is AttentionFallback.GPU and capability is not None:
        return f"the GPU's compute capability {capability:.1f} has no such kernel"
    if reason is AttentionFallback.GPU:  # vLLM names the architectures, not the capability
        return "a Volta or Turing GPU (compute capability below 8.0) has no such kernel"
    return "the engine gave no reason" if reason is None else _FALLBACK_WHY[reason]


def _fallback_steps(ev: Evidence, reason: AttentionFallback | None) -> tuple[str, ...]:
    measure = (
        "measure what it costs: a trace (`--profile 5`) gives the attention kernels' share "
        "of a step"
    )
    if reason is AttentionFallback.GPU:
        return (
            "serve on a GPU with the fused kernel: FlashAttention-2 needs compute capability "
            "8.0 or newer (Ampere, Ada, Hopper); TGI's flash models need 7.5 (Flash "
            "Attention V1) or 8.0 (V2), as its supported-hardware page lists",
            measure,
        )
    backend = engine_flag(ev, Knob.ATTENTION_BACKEND)
    ruled_out = "what its line names" if reason is None else _FALLBACK_WHY[reason]
    other = f" or pick another fused backend (`{backend}`)" if backend else ""
    return (f"change what ruled the kernel out ({ruled_out}){other}", measure)


@rule("kernel.attention_fallback", _L, ("log.attention_fallbacks",))
def attention_fallback(ev: Evidence, t: Thresholds) -> Finding | None:
    """The engine left its flash-attention kernel at start-up, as its log says.

    vLLM's selector says "Cannot use FlashAttention-2 backend for Volta and Turing GPUs."
    (or another reason) and runs XFormers, itself a fused kernel (V1: "Cannot use FA version
    2 is not supported due to …", then Triton or FlexAttention): attention is slower, the
    rest of the step is not. TGI says "GPU with CUDA capability 7 0 is not supported" and
    serves its non-flash model classes: padded batches, no paged attention, more memory.
    A warning: the line states the kernel, not the time it cost, and a server on such a
    GPU may meet its SLOs. A bottleneck only when the ITL SLO is missed (attention runs in
    every decode step, so a slower kernel shows in the time between tokens) and the line
    says no fused kernel was kept. Read from a log, not measured: it explains at most a
    quarter of the miss, so a measured cause beside it ranks first.
    """
    if (ev.get("log.attention_fallbacks") or 0.0) < 1:
        return None
    reason = _fallback_reason(ev)
    why = _fallback_why(ev, reason)
    fused = (ev.get("log.attention_kept_fused") or 0.0) >= 1
    to = "another fused kernel" if fused else "non-flash attention (padded batches)"
    # none kept, as the line says (not merely unsaid): the slow path a missed ITL can show
    none_kept = ev.get("log.attention_kept_fused") == 0.0
    return make_finding(
        "kernel.attention_fallback",
        _L,
        bottleneck=itl_missed(ev, t) and none_kept,
        severity=0.4 if fused else 0.7,
        explains=0.25 if none_kept else 0.15,
        title=f"attention fell back from the flash kernel to {to}: {why}",
        evidence=ev,
        used=(
            ("log.attention_fallbacks", 0.0),
            ("log.gpu_capability", None),
            ("log.attention_kept_fused", None),
        ),
        explanation=(
            "At start-up the engine found its flash-attention kernel unusable here and chose "
            "a slower path: attention reads the KV cache less efficiently in every step, and "
            "without a fused kernel it materialises the score matrix and pads the batch."
        ),
        next_steps=_fallback_steps(ev, reason),
    )
