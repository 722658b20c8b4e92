"""Three rising ticks in a row: strict contiguity.

A tick, then exactly three upticks of the same symbol, each strictly above the tick before
it, with no other tick of that symbol in between (``next`` plus a ``consecutive`` loop).
After a match the scan resumes past its last tick, so matches do not overlap.

    python examples/three_rising.py                 # 200,000 ticks, in this process
    python examples/three_rising.py --spark         # the same on local Spark
"""
import sys

from _common import run

from colcep import Pattern, SkipPastLastEvent, col, last

PATTERN = (Pattern.begin("start")
           .next("up").where(col("price") > last("price", of=["start", "up"])).times(3).consecutive()
           .skip(SkipPastLastEvent()))


def main(argv=None):
    return run(PATTERN, __doc__, columns=["price"], argv=argv)


if __name__ == "__main__":
    main(sys.argv[1:])
