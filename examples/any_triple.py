"""Every rising triple after a large trade: skip till any match.

After a tick with volume > 1000 (``a``), every pair of later ticks ``b``, ``c`` of the same
symbol with a.price < b.price < c.price, within 1 s of ``a``. ``followed_by_any`` may skip
ticks that would qualify, so one large trade yields all such combinations, not just the
first: the number of matches grows with the square of the ticks in the window.

    python examples/any_triple.py                   # 200,000 ticks, in this process
    python examples/any_triple.py --spark           # the same on local Spark
"""
import sys

from _common import run

from colcep import Pattern, col, last

PATTERN = (Pattern.begin("a").where(col("volume") > 1000.0)
           .followed_by_any("b").where(col("price") > last("price", of="a"))
           .followed_by_any("c").where(col("price") > last("price", of="b"))
           .within("1s"))


def main(argv=None):
    return run(PATTERN, __doc__, columns=["price", "volume"], argv=argv)


if __name__ == "__main__":
    main(sys.argv[1:])
