"""cli, level 6: takes `-v`/`-q` counts; gives Python logging its level and one format on stderr.

Every module that logs does so through `logging.getLogger(__name__)`; the command
line sets the level once, at the root of the app: `-q` errors only, `-v`
infertriage's progress (INFO), `-vv` its details (DEBUG) and the libraries'
progress (INFO), `-vvv` everything (DEBUG), each line as `FORMAT` says. Without
either flag nothing is configured: Python's own handler prints warnings and errors
on stderr, and a command that never logs does not import `logging` (start-up).
Standard output is the result's (a table, `--json`): logs go to stderr only.
"""

from __future__ import annotations

import sys

__all__ = ["FORMAT", "configure", "levels"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "infertriage-cli"
# logging's levels, written out so that importing this module does not import logging
_DEBUG, _INFO, _WARNING, _ERROR = 10, 20, 30, 40


def levels(verbose: int, quiet: bool) -> tuple[int, int]:
    """(infertriage's level, every other library's level) for `-v` counted `verbose` times
    and `-q`; `-q` wins over `-v`."""
    if quiet:
        return _ERROR, _ERROR
    own = (_WARNING, _INFO, _DEBUG)[min(verbose, 2)]
    others = (_WARNING, _WARNING, _INFO, _DEBUG)[min(verbose, 3)]
    return own, others


def configure(verbose: int = 0, quiet: bool = False) -> None:
    """One stderr handler on the root logger (replaced, not added, when called again);
    nothing without `-v` or `-q`."""
    if not verbose and not quiet:
        return
    import logging  # noqa: PLC0415  # only when asked for: see the docstring

    own, others = levels(verbose, quiet)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(others)  # the libraries'; infertriage's records pass the handler at any level
    logging.getLogger("infertriage").setLevel(own)
