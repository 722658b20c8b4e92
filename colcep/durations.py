"""The one duration parser: ``"500ms"``, ``"10s"``, ``"5min"``, ``"1d"``, timedeltas, or an int
already in the time column's unit, converted exactly (fractions, no float rounding)."""
from __future__ import annotations

import datetime as _dt
import re
from fractions import Fraction
from typing import Any

import numpy as np

from colcep.errors import WindowSpecError

NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "sec": 10**9, "m": 60 * 10**9, "min": 60 * 10**9,
      "h": 3600 * 10**9, "hour": 3600 * 10**9, "d": 86400 * 10**9, "day": 86400 * 10**9}
TIME_UNITS = ("s", "ms", "us", "ns")


def check_duration(value: Any, what: str, signed: bool = False, error: type = WindowSpecError) -> None:
    """Validate a duration early, before the time column's unit is known."""
    to_units(value, "ns", what, signed, exact=False, error=error)


def to_units(value: Any, unit: str, what: str, signed: bool = False, exact: bool = True,
             error: type = WindowSpecError) -> int:
    """``value`` in ``unit``: an int is already in the column's unit; a string or timedelta
    must be a whole number of it. Unless ``signed``, the value must be > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, str, _dt.timedelta)):
        raise error(f"{what} must be an int (time column units), a string like '1min' or a "
                    f"timedelta, got {value!r}")
    if isinstance(value, (int, np.integer)):
        units = Fraction(int(value))
    else:
        if isinstance(value, _dt.timedelta):
            ns = Fraction((value.days * 86400 + value.seconds) * 10**6 + value.microseconds) * 1000
        else:
            m = re.fullmatch(r"\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", value.lower())
            if not m or m.group(3) not in NS:
                raise error(f"invalid {what} {value!r}: use e.g. '500ms', '10s', '5min', '-8h', '1d'")
            ns = Fraction(m.group(2)) * NS[m.group(3)] * (-1 if m.group(1) == "-" else 1)
        units = ns / NS[unit]
    if not signed and units <= 0:
        raise error(f"{what} must be > 0, got {value!r}")
    if exact and units.denominator != 1:
        raise error(f"{what} {value!r} is not a whole number of the time column's unit ({unit})")
    return int(units)
