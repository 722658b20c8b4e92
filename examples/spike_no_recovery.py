"""A spike not followed by a recovery within 5 minutes: negation.

A tick 0.15 % or more above the tick right before it (``base`` then ``spike``, strict), after
which the price does not fall back to the pre-spike level (``not_followed_by("recovery")``)
before 5 minutes have passed since ``base``. A match is known only when the window has
closed, so it is emitted at the first tick after the 5 minutes, or at the end of the data.

    python examples/spike_no_recovery.py            # 400,000 ticks (~13 minutes), in this process
    python examples/spike_no_recovery.py --spark    # the same on local Spark
"""
import sys

from _common import run

from colcep import Pattern, col, last

PATTERN = (Pattern.begin("base")
           .next("spike").where(col("price") >= 1.0015 * last("price", of="base"))
           .not_followed_by("recovery").where(col("price") <= last("price", of="base"))
           .within("5min"))


def main(argv=None):
    return run(PATTERN, __doc__, columns=["price"], argv=argv, events=400_000, symbols=20)


if __name__ == "__main__":
    main(sys.argv[1:])
