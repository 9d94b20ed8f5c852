"""schemas, level 0: a package's re-exports, each imported on first use.

Takes a package and which submodule defines each name it re-exports; gives the
package's module `__getattr__` (PEP 562). A command imports only the modules it
uses: `infertriage --version` or `plan` does not load the load generator, the
twin or numpy because their package's `__init__` names them. The names stay
importable as before (`from infertriage.twin import Scenario`), and a function
named like its own module (`twin.simulate`) stays the function once that module
has loaded. Imports only the standard library.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


class _LazyPackage(types.ModuleType):
    """A package whose re-exports load on first use (see the module docstring)."""

    _lazy_homes: Mapping[str, str]

    def __setattr__(self, name: str, value: object) -> None:
        # the import system sets a submodule on its package once it has loaded; where
        # the package re-exports a function of that same name, the name stays the function
        home = self.__dict__.get("_lazy_homes", {}).get(name)
        if isinstance(value, types.ModuleType) and value.__name__ == home:
            value = getattr(value, name)
        super().__setattr__(name, value)


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: `homes` maps each re-exported name to
    the submodule that defines it (its full dotted name)."""
    module = sys.modules[package]
    module.__class__ = _LazyPackage
    module.__dict__["_lazy_homes"] = dict(homes)

    def __getattr__(name: str) -> object:  # PEP 562's name
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        module.__dict__[name] = value
        return value

    return __getattr__
