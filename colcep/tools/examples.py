"""Built-in named patterns over tick data (``colcep.tools.ticks``: name, ts, price, volume).

    from colcep.tools.examples import EXAMPLES, get_example, benchmark_pattern, P3
    ex = get_example("paper_query3")          # Example(name, pattern, key, time, columns, ...)
    colcep.match(ticks, ex.pattern, key=ex.key, time=ex.time, columns=ex.columns)

The scans used by ``colcep scan --pattern NAME`` and ``examples/``:

- ``paper_query3``: the SASE+ paper's Query 3, a rising trend then a volume drop;
- ``three_rising``: three rising ticks in a row (strict contiguity);
- ``any_triple``: every rising triple after a large trade (skip-till-any-match);
- ``spike_no_recovery``: a price spike not followed by a recovery within 5 minutes (negation).

``P1``..``P5`` are the benchmark patterns of docs/benchmarks.md, translated one to one from the
benchmark's JSON (``benchmark_pattern("P3")`` is the same object as ``P3``).
"""
from __future__ import annotations

from dataclasses import dataclass

from colcep.expr import avg, col, count, last, sum
from colcep.pattern import Pattern
from colcep.skip import SkipPastLastEvent


@dataclass(frozen=True)
class Example:
    """A named scan: the pattern, the columns it runs on and a one-line description."""

    name: str
    pattern: Pattern
    description: str
    key: str = "name"
    time: str = "ts"
    columns: tuple[str, ...] = ("price", "volume")


# ----------------------------------------------------------------------------- the benchmark patterns
#: P1: a big-volume tick followed immediately by two rising ticks (strict ``next``), within 10 s.
P1 = (Pattern.begin("a").where(col("volume") > 800.0)
      .next("b").where(col("price") > last("price", of="a"))
      .next("c").where(col("price") > last("price", of="b"))
      .within(10_000))

#: P2: big volume, then one or more ticks above it, then a drop below 99.9 % of the last of
#: them (skip till next match, Kleene plus, skip past last event), within 60 s.
P2 = (Pattern.begin("a").where(col("volume") > 900.0)
      .followed_by("b").where(col("price") > last("price", of="a")).one_or_more()
      .followed_by("c").where(col("price") < last("price", of="b") * 0.999)
      .within(60_000).skip(SkipPastLastEvent()))

#: P3: the paper's Query 3 as in the benchmark: a1.volume > 1000; a[i].price above the mean of
#: a1 and the a[i] so far; b.volume < 80 % of the last a[i]'s; within 1 hour.
P3 = (Pattern.begin("a1").where(col("volume") > 1000.0)
      .followed_by("ai").where(col("price") > (sum("price", of="ai") + last("price", of="a1"))
                               / (count(of="ai", field="price") + 1.0)).one_or_more()
      .followed_by("b").where(col("volume") < 0.8 * last("volume", of="ai"))
      .within(3_600_000).skip(SkipPastLastEvent()))

#: P4: every rising triple after a tick with volume > 600 within 2 s (skip till any match).
P4 = (Pattern.begin("a").where(col("volume") > 600.0)
      .followed_by_any("b").where(col("price") > last("price", of="a"))
      .followed_by_any("c").where(col("price") > last("price", of="b"))
      .within(2_000))

#: P5: many live partial matches: a big-volume tick, then the first tick of its symbol above 1.05 x
#: its price (skip till next match), within 1 hour, no skip: every open ``a`` waits for its own level.
P5 = (Pattern.begin("a").where(col("volume") > 800.0)
      .followed_by("b").where(col("price") > 1.05 * last("price", of="a"))
      .within(3_600_000))

BENCHMARK_PATTERNS: dict[str, Pattern] = {"P1": P1, "P2": P2, "P3": P3, "P4": P4, "P5": P5}


def desk_patterns() -> dict[str, Pattern]:
    """Twenty tick signals a desk would scan together (``colcep.match_many``, ``colcep scan
    --pattern desk``): the five benchmark families, four variants each, with other thresholds
    and windows. Names say the family and the variant, e.g. ``P2_v950_d0.998_w2m``."""
    out: dict[str, Pattern] = {}
    for vol, win in ((700, 5), (800, 10), (900, 20), (950, 30)):  # P1: big volume, two rising ticks next
        out[f"P1_v{vol}_w{win}s"] = (Pattern.begin("a").where(col("volume") > float(vol))
                                     .next("b").where(col("price") > last("price", of="a"))
                                     .next("c").where(col("price") > last("price", of="b"))
                                     .within(win * 1000))
    for vol, drop, win in ((850, 0.999, 1), (900, 0.9995, 1), (950, 0.998, 2), (980, 0.997, 5)):  # P2
        out[f"P2_v{vol}_d{drop}_w{win}m"] = (Pattern.begin("a").where(col("volume") > float(vol))
                                            .followed_by("b").where(col("price") > last("price", of="a"))
                                            .one_or_more()
                                            .followed_by("c").where(col("price") < last("price", of="b") * drop)
                                            .within(win * 60_000).skip(SkipPastLastEvent()))
    for vol, frac, win in ((1000, 0.8, 60), (1200, 0.8, 30), (1500, 0.7, 60), (900, 0.6, 15)):  # P3
        out[f"P3_v{vol}_f{frac}_w{win}m"] = (Pattern.begin("a1").where(col("volume") > float(vol))
                                            .followed_by("ai").where(
                                                col("price") > (sum("price", of="ai") + last("price", of="a1"))
                                                / (count(of="ai", field="price") + 1.0)).one_or_more()
                                            .followed_by("b").where(col("volume") < frac * last("volume", of="ai"))
                                            .within(win * 60_000).skip(SkipPastLastEvent()))
    # P4: every rising triple after a big tick, skip till any: its output grows with the cube of the
    # ticks a key has within the window, so the windows stay short
    for vol, win in ((600, 2000), (800, 1500), (1000, 1000), (1200, 500)):
        out[f"P4_v{vol}_w{win}ms"] = (Pattern.begin("a").where(col("volume") > float(vol))
                                      .followed_by_any("b").where(col("price") > last("price", of="a"))
                                      .followed_by_any("c").where(col("price") > last("price", of="b"))
                                      .within(win))
    for vol, level, win in ((800, 1.05, 60), (1000, 1.03, 30), (1200, 1.02, 15), (1500, 1.01, 60)):  # P5
        out[f"P5_v{vol}_l{level}_w{win}m"] = (Pattern.begin("a").where(col("volume") > float(vol))
                                             .followed_by("b").where(col("price") > level * last("price", of="a"))
                                             .within(win * 60_000))
    return out


def benchmark_pattern(name: str) -> Pattern:
    """One of the benchmark patterns by id: ``"P1"``..``"P5"`` (or the full id of
    ``patterns.json``, e.g. ``"P3_paper_query3"``)."""
    short = name.split("_", 1)[0].upper()
    if short not in BENCHMARK_PATTERNS:
        raise KeyError(f"unknown benchmark pattern {name!r}; choose one of {sorted(BENCHMARK_PATTERNS)}")
    return BENCHMARK_PATTERNS[short]


# ----------------------------------------------------------------------------- the example scans
#: The SASE+ paper's Query 3 on ticks: a large trade (volume > 1000) starts a rising trend in
#: which every further tick is above the average price of the trend so far, ended by a tick
#: whose volume drops below 80 % of the trend's last volume. The paper's one-hour window is
#: scaled to the tick rate (a symbol ticks every ~0.2 s in the 100-symbol data): 30 s.
PAPER_QUERY3 = (Pattern.begin("a1").where(col("volume") > 1000.0)
                .followed_by("ai").where(col("price") > avg("price", of=["a1", "ai"])).one_or_more()
                .followed_by("b").where(col("volume") < 0.8 * last("volume", of="ai"))
                .within("30s").skip(SkipPastLastEvent()))

#: Three rising ticks in a row: a tick, then exactly three upticks, each strictly above the
#: one before, with no other tick of the symbol between them; runs do not overlap.
THREE_RISING = (Pattern.begin("start")
                .next("up").where(col("price") > last("price", of=["start", "up"])).times(3).consecutive()
                .skip(SkipPastLastEvent()))

#: Skip till any match: after a large trade (volume > 1000), every pair of later ticks
#: b, c (not necessarily adjacent) with a.price < b.price < c.price, all within 1 s.
ANY_TRIPLE = (Pattern.begin("a").where(col("volume") > 1000.0)
              .followed_by_any("b").where(col("price") > last("price", of="a"))
              .followed_by_any("c").where(col("price") > last("price", of="b"))
              .within("1s"))

#: Negation: a spike (a tick 0.15 % or more above the tick before it) that the price does not
#: recover from (falls back to the pre-spike price) within 5 minutes. Matches are released
#: once the 5 minutes have passed, or at the end of the data.
SPIKE_NO_RECOVERY = (Pattern.begin("base")
                     .next("spike").where(col("price") >= 1.0015 * last("price", of="base"))
                     .not_followed_by("recovery").where(col("price") <= last("price", of="base"))
                     .within("5min"))

EXAMPLES: dict[str, Example] = {e.name: e for e in (
    Example("paper_query3", PAPER_QUERY3, "SASE+ Query 3: a rising trend after a large trade, then a volume drop"),
    Example("three_rising", THREE_RISING, "three rising ticks in a row (strict contiguity)", columns=("price",)),
    Example("any_triple", ANY_TRIPLE, "every rising triple within 1 s after a large trade (skip till any match)"),
    Example("spike_no_recovery", SPIKE_NO_RECOVERY, "a 0.15 % spike not recovered within 5 minutes (negation)",
            columns=("price",)),
    *(Example(k.lower(), p, f"benchmark pattern {k} (docs/benchmarks.md)")
      for k, p in BENCHMARK_PATTERNS.items()),
)}


def get_example(name: str) -> Example:
    """A built-in scan by name (``paper_query3``, ``three_rising``, ``any_triple``,
    ``spike_no_recovery``, ``p1``..``p5``)."""
    try:
        return EXAMPLES[name.lower()]
    except KeyError:
        raise KeyError(f"unknown example pattern {name!r}; choose one of {sorted(EXAMPLES)}") from None
