"""diagnose, level 3: the rules, one module per layer; importing this registers them all."""

from infertriage.diagnose.rules import (
    application,
    artefacts,
    hardware,
    kernel,
    logs,
    memory,
    moe_pipeline,
    parallelism,
    scheduling,
    speculative,
)

__all__ = [
    "application",
    "artefacts",
    "hardware",
    "kernel",
    "logs",
    "memory",
    "moe_pipeline",
    "parallelism",
    "scheduling",
    "speculative",
]
