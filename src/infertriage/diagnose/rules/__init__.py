"""diagnose, level 3: the rules, one module per layer; importing this registers them all."""

from infertriage.diagnose.rules import (
    application,
    artefacts,
    disagg,
    hardware,
    kernel,
    logs,
    memory,
    moe_pipeline,
    offload,
    parallelism,
    scheduling,
    speculative,
)

__all__ = [
    "application",
    "artefacts",
    "disagg",
    "hardware",
    "kernel",
    "logs",
    "memory",
    "moe_pipeline",
    "offload",
    "parallelism",
    "scheduling",
    "speculative",
]
