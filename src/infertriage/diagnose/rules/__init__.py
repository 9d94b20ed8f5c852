"""diagnose, level 3: the rules, one module per layer; importing this registers them all."""

from infertriage.diagnose.rules import (
    application,
    hardware,
    kernel,
    logs,
    memory,
    parallelism,
    scheduling,
    speculative,
)

__all__ = [
    "application",
    "hardware",
    "kernel",
    "logs",
    "memory",
    "parallelism",
    "scheduling",
    "speculative",
]
