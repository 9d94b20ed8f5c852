"""cli, level 6: takes `-v`/`-q` counts; gives Python logging its level and one format on stderr.

Every module that logs does so through `logging.getLogger(__name__)`; the command
line sets the level once, at the root of the app: `-q` errors only, none the
warnings, `-v` infertriage's progress (INFO), `-vv` its details (DEBUG) and the
libraries' progress (INFO), `-vvv` everything (DEBUG). Standard output is the
result's (a table, `--json`): logs go to stderr only.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["FORMAT", "configure", "levels"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "infertriage-cli"


def levels(verbose: int, quiet: bool) -> tuple[int, int]:
    """(infertriage's level, every other library's level) for `-v` counted `verbose` times
    and `-q`; `-q` wins over `-v`."""
    if quiet:
        return logging.ERROR, logging.ERROR
    own = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    others = (logging.WARNING, logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 3)]
    return own, others


def configure(verbose: int = 0, quiet: bool = False) -> None:
    """One stderr handler on the root logger (replaced, not added, when called again)."""
    own, others = levels(verbose, quiet)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(others)  # the libraries'; a record of infertriage's passes the handler at any
    logging.getLogger("infertriage").setLevel(own)
