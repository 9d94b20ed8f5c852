"""diagnose, level 3: the rules, one module per layer; importing this registers them all."""

from infertriage.diagnose.rules import (
    application,
    hardware,
    kernel,
    memory,
    parallelism,
    scheduling,
    speculative,
)

__all__ = [
    "application",
    "hardware",
    "kernel",
    "memory",
    "parallelism",
    "scheduling",
    "speculative",
]
