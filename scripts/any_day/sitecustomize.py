"""Move this Python's wall clock by $ANY_DAY_OFFSET_S seconds; the monotonic clock stays real.

Loaded by every Python that scripts/any_day/run.sh starts (this folder is on PYTHONPATH, so
the suite's own subprocesses — twins, xdist workers, CLI runs — see the same day). It wraps
what the product reads the date through: `time.time`/`time_ns`, `time.localtime`/`gmtime`/
`ctime`/`strftime` without a time, and `datetime.datetime.now`/`utcnow`/`today` and
`datetime.date.today`. Waits and timeouts run on the monotonic clock, untouched, so a run on
a moved day takes as long as on today. (libfaketime moves the monotonic clock with the wall
one, and Python's timed waits then block for the offset, or, with the monotonic clock kept,
its `clock_nanosleep` fails with EINVAL: hence this.) File times the kernel writes stay real.
"""

from __future__ import annotations

import datetime as _dt
import os
import time as _time
from typing import Any

_OFFSET_S = float(os.environ.get("ANY_DAY_OFFSET_S", "0") or 0)

if _OFFSET_S:
    _real_time, _real_time_ns = _time.time, _time.time_ns
    _real_localtime, _real_gmtime = _time.localtime, _time.gmtime
    _real_ctime, _real_strftime = _time.ctime, _time.strftime

    def _time_now() -> float:
        return _real_time() + _OFFSET_S

    def _time_ns() -> int:
        return _real_time_ns() + int(_OFFSET_S * 1e9)

    def _localtime(secs: float | None = None) -> _time.struct_time:
        return _real_localtime(_time_now() if secs is None else secs)

    def _gmtime(secs: float | None = None) -> _time.struct_time:
        return _real_gmtime(_time_now() if secs is None else secs)

    def _ctime(secs: float | None = None) -> str:
        return _real_ctime(_time_now() if secs is None else secs)

    def _strftime(fmt: str, t: Any = None) -> str:
        return _real_strftime(fmt, _localtime() if t is None else t)

    _time.time, _time.time_ns = _time_now, _time_ns
    _time.localtime, _time.gmtime, _time.ctime = _localtime, _gmtime, _ctime
    _time.strftime = _strftime

    class _Datetime(_dt.datetime):
        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> Any:
            return cls.fromtimestamp(_time_now(), tz)

        @classmethod
        def utcnow(cls) -> Any:
            return cls.fromtimestamp(_time_now(), _dt.UTC).replace(tzinfo=None)

        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_time_now())

    class _Date(_dt.date):
        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_time_now())

    _dt.datetime, _dt.date = _Datetime, _Date  # type: ignore[misc]
