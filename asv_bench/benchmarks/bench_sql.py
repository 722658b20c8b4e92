"""SQL MATCH_RECOGNIZE: the SQL forms of P1-P3 in the standard mode (SQL:2016 preferment, its own
kernel) and in the CEP-style mode (Flink SQL's matching, lowered to a colcep Pattern), on the
same synthetic ticks (``colcep.tools.ticks.make_ticks``: 10^6 ticks, 100 symbols, seed 7).

SQL rows of a match are contiguous, so P2 and P3 are their strict forms (``A B+ C``), and a
running SUM in SQL includes the row being tested (P3's average of the earlier rows is written
out). Run against the installed package: ``asv run --python=same --bench bench_sql``.
"""
import time

import colcep
from colcep.tools.ticks import make_ticks

EVENTS, SYMBOLS, SEED = 1_000_000, 100, 7

FORMS = {
    "P1": ("A B C", "A AS A.volume > 800, B AS B.price > A.price, C AS C.price > B.price", "TO NEXT ROW", "C"),
    "P2": ("A B+ C", "A AS A.volume > 900, B AS B.price > A.price, C AS C.price < 0.999 * LAST(B.price)",
           "PAST LAST ROW", "C"),
    "P3": ("A1 AI+ B", "A1 AS A1.volume > 1000, AI AS AI.price > (SUM(AI.price) - AI.price + A1.price) / "
           "COUNT(AI.price), B AS B.volume < 0.8 * LAST(AI.volume)", "PAST LAST ROW", "B"),
}


def query(name: str) -> str:
    """The SQL form of benchmark pattern ``name`` (P1, P2 or P3): one row per match."""
    pattern, define, skip, last = FORMS[name]
    return (f"SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts, id "
            f"MEASURES FIRST(ts) AS start_ts, LAST({last}.ts) AS end_ts, COUNT(*) AS n ONE ROW PER MATCH "
            f"AFTER MATCH SKIP {skip} PATTERN ({pattern}) DEFINE {define})")


class SqlModes:
    """One query over the whole table, per mode."""

    params = (list(FORMS), ["standard", "cep"])
    param_names = ["pattern", "semantics"]
    timeout = 600

    def setup_cache(self):
        return make_ticks(EVENTS, SYMBOLS, SEED)

    def setup(self, ticks, pattern, semantics):
        colcep.sql(query(pattern), semantics=semantics, ticks=ticks.slice(0, 1000))  # warm the kernels

    def time_sql(self, ticks, pattern, semantics):
        colcep.sql(query(pattern), semantics=semantics, ticks=ticks)

    def track_rows_per_second(self, ticks, pattern, semantics):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            colcep.sql(query(pattern), semantics=semantics, ticks=ticks)
            best = min(best, time.process_time() - t0)
        return ticks.num_rows / best

    track_rows_per_second.unit = "rows/s"

    def track_matches(self, ticks, pattern, semantics):
        return colcep.sql(query(pattern), semantics=semantics, ticks=ticks).num_rows

    track_matches.unit = "matches"
