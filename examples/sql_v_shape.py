"""V shapes in SQL: a fall of two or more ticks, then a rise that ends above where the fall began.

The query is standard SQL MATCH_RECOGNIZE (``colcep.sql``'s default mode, as Trino and Oracle
run it). ``DOWN{2,}`` and ``UP*`` are greedy: the V takes every falling tick, then every rising
one, and gives back only what ``TOP`` needs, so ``TOP`` is the last rising tick of the rise that
is above the start (the standard's preferment; Flink's CEP-style matching would stop at the
first such tick).

    python examples/sql_v_shape.py                  # 200,000 ticks, in this process
    python examples/sql_v_shape.py --spark          # the same query on local Spark
"""
import argparse
import sys
import time

import colcep
from colcep.tools.ticks import make_ticks

QUERY = """
SELECT * FROM ticks MATCH_RECOGNIZE (
    PARTITION BY name ORDER BY ts, id
    MEASURES STRT.id AS start_id, LAST(DOWN.id) AS bottom_id, TOP.id AS end_id,
             STRT.price AS start_price, LAST(DOWN.price) AS bottom, TOP.price AS top,
             COUNT(DOWN.*) AS falls, COUNT(*) - COUNT(DOWN.*) - 1 AS rises, MATCH_NUMBER() AS n
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (STRT DOWN{2,} UP* TOP)
    DEFINE DOWN AS price < PREV(price),
           UP AS price > PREV(price),
           TOP AS price > PREV(price) AND price > STRT.price
)"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="ticks to generate (default 200,000)")
    ap.add_argument("--symbols", type=int, default=50, help="symbols (default 50)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spark", action="store_true", help="run on local Spark instead of in this process")
    ap.add_argument("--show", type=int, default=5, help="matches to print (default 5)")
    a = ap.parse_args(argv)

    ticks = make_ticks(a.events, a.symbols, a.seed)  # id, name, ts (ms), price, volume
    query = QUERY
    t0 = time.perf_counter()
    if a.spark:
        from colcep.spark import local_session
        spark = local_session()
        out = colcep.sql(query, ticks=spark.createDataFrame(ticks)).toArrow().sort_by([("name", "ascending"),
                                                                                      ("start_id", "ascending")])
        engine = f"Spark {spark.sparkContext.master}"
    else:
        out = colcep.sql(query, ticks=ticks)
        engine = "in-process"
    secs = time.perf_counter() - t0
    print(__doc__.strip().splitlines()[0])
    print(f"  {a.events:,} ticks over {a.symbols} symbols, {engine}: {out.num_rows:,} V shapes in {secs:.2f} s")
    if out.num_rows and a.show:
        print(out.slice(0, a.show).to_pandas().to_string(index=False))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
