"""The SASE+ paper's Query 3 on ticks: a rising trend after a large trade, then a volume drop.

    a1: volume > 1000                                   a large trade starts the trend
    ai+: price > avg(price of a1 and the ai so far)     every further tick lifts the average
    b:  volume < 0.8 * volume of the last ai            the trend ends on a volume drop
    within 30 s, skip till next match, skip past the last event of a match

The paper's window is one hour over minute data; the synthetic ticks come every ~0.1 s per
symbol here, so the window is 30 s (the benchmark's P3 keeps the hour).

    python examples/paper_query3.py                 # 200,000 ticks, in this process
    python examples/paper_query3.py --spark         # the same on local Spark
"""
import sys

from _common import run

from colcep import Pattern, SkipPastLastEvent, avg, col, last

PATTERN = (Pattern.begin("a1").where(col("volume") > 1000.0)
           .followed_by("ai").where(col("price") > avg("price", of=["a1", "ai"])).one_or_more()
           .followed_by("b").where(col("volume") < 0.8 * last("volume", of="ai"))
           .within("30s").skip(SkipPastLastEvent()))


def main(argv=None):
    return run(PATTERN, __doc__, columns=["price", "volume"], argv=argv)


if __name__ == "__main__":
    main(sys.argv[1:])
