"""The Flink SQL oracle (``../shared/tools/flink_sql_oracle/mr_oracle.py``, same arguments) with
one mend: a ``TIMESTAMP(3)`` that Python's ``datetime`` cannot hold comes back as text instead of
failing the case.

Flink 2.3 gives ``MATCH_ROWTIME()`` the time its CEP operator emits the match at (see
``colcep/lang/sql/rowtime.py``); a match released by the end of input is emitted at the final
watermark, ``Long.MAX_VALUE`` milliseconds (+292278994-08-17 07:12:55.807). PyFlink hands such a
value over as a ``datetime`` whose year Java's calendar has overflowed (1701533 instead of
292278994; the time of day, 07:12:55.807, is right), and unpickling it raises ``ValueError: year
1701533 is out of range``, which the oracle records as the case's error. Here that value, and only
it, becomes ``FINAL_WATERMARK``; any other unreadable timestamp still fails the case::

    $FLINK_VENV/bin/python tests/flinksql_oracle.py CASES.json --sort -o OUT.json 2> OUT.log
"""
from __future__ import annotations

import datetime as dt
import io
import pickle
import sys
from pathlib import Path

FINAL_WATERMARK = "+292278994-08-17 07:12:55.807"   # Long.MAX_VALUE ms, as Java's LocalDateTime prints it
_ORACLE = Path(__file__).resolve().parents[2] / "shared" / "tools" / "flink_sql_oracle"


class _Args(pickle.Unpickler):
    """Unpickles PyFlink's timestamp (``attrgetter("localize")(pytz.timezone(zone))(datetime(*args))``)
    without building the ``datetime``: ``("datetime", args)``."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("datetime", "datetime"):
            return lambda *args: ("datetime", args)
        if (module, name) == ("operator", "attrgetter"):      # the zone's localize: left out
            return lambda attr: (lambda zone: (lambda value: value))
        return super().find_class(module, name)


def _mend(convert):
    def converter(data, field_type):
        from pyflink.table.types import TimestampType
        try:
            return convert(data, field_type)
        except ValueError:
            if not isinstance(field_type, TimestampType):
                raise
            got = _Args(io.BytesIO(data)).load()
            args = got[1] if isinstance(got, tuple) and got[0] == "datetime" else ()
            if len(args) >= 7 and args[3:7] == (7, 12, 55, 807000) and not dt.MINYEAR <= args[0] <= dt.MAXYEAR:
                return FINAL_WATERMARK
            raise
    return converter


def main() -> None:
    sys.path.insert(0, str(_ORACLE))
    import mr_oracle
    import pyflink.table.table_result as table_result
    import pyflink.table.utils as utils
    table_result.pickled_bytes_to_python_converter = _mend(utils.pickled_bytes_to_python_converter)
    mr_oracle.main()


if __name__ == "__main__":
    main()
