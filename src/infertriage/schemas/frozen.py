"""schemas, level 0: the one base of a frozen, strict pydantic model.

Gives `FrozenModel`: no field changes after it is built and no field it does not
declare, so a stored document read back is exactly the one written.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["FrozenModel"]


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
