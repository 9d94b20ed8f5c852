"""schemas, level 0: the seven layers of the bottleneck map and the five statuses."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["LAYER_ORDER", "Layer", "Status"]


class Layer(StrEnum):
    """Where along the request path a bottleneck sits, from the silicon up."""

    HARDWARE = "hardware"
    KERNEL = "kernel"
    MEMORY = "memory"
    SCHEDULING = "scheduling"
    PARALLELISM = "parallelism"
    SPECULATIVE = "speculative"
    APPLICATION = "application"


LAYER_ORDER: tuple[Layer, ...] = tuple(Layer)


class Status(StrEnum):
    """The verdict on one layer.

    `unknown` means the evidence is missing (the layer says what would collect
    it); `n/a` means the layer is not in use (no speculative decoding, one GPU).
    """

    OK = "ok"
    WARNING = "warning"
    BOTTLENECK = "bottleneck"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "n/a"
