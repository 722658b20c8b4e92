"""Cases for colcep's window triggers and evictors, in the format of the Flink window oracle
(``tests/flink_windows/``): hand-written probes, one rule each, then seeded random cases over every
window kind, trigger, evictor, lateness and disorder. Standard library only, deterministic::

    python tests/wingen.py -n 300 --seed 1 -o /tmp/cases.json
    python tests/flink_windows/oracle.py /tmp/cases.json -o tests/data/window_triggers.json

A case is ``{"name", "window", "trigger", "evictor", "lateness", "bound", "rows"}`` (see
``tests/flink_windows/README.md``); the oracle adds ``expected``.
"""
from __future__ import annotations

import argparse
import json
import random

# ------------------------------------------------------------------ building blocks


def tumbling(size, offset=0):
    return {"kind": "tumbling", "size": size, "offset": offset}


def sliding(size, slide, offset=0):
    return {"kind": "sliding", "size": size, "slide": slide, "offset": offset}


def session(gap):
    return {"kind": "session", "gap": gap}


GLOBAL = {"kind": "global"}
EVENT_TIME = {"kind": "event_time"}


def count(n):
    return {"kind": "count", "n": n}


def continuous(interval):
    return {"kind": "continuous", "interval": interval}


def delta(threshold):
    return {"kind": "delta", "threshold": threshold}


def purging(t):
    return {"kind": "purging", "of": t}


def any_of(*ts):
    return {"kind": "any", "of": list(ts)}


def ev_count(n, after=False):
    return {"kind": "count", "n": n, "after": after}


def ev_time(size, after=False):
    return {"kind": "time", "size": size, "after": after}


def ev_delta(threshold, after=False):
    return {"kind": "delta", "threshold": threshold, "after": after}


def case(name, window, rows, trigger=None, evictor=None, lateness=0, bound=0):
    """``rows``: (key, ts, value) or (ts, value) for key "a"."""
    rs = [[r[0], r[1], float(r[2])] if len(r) == 3 else ["a", r[0], float(r[1])] for r in rows]
    return {"name": name, "window": window, "trigger": trigger, "evictor": evictor,
            "lateness": lateness, "bound": bound, "rows": rs}


def seq(*ts, v=1.0):
    """Rows for key "a" at the given timestamps, values 1, 2, 3... unless ``v`` is a list."""
    vals = v if isinstance(v, list) else [float(i + 1) for i in range(len(ts))]
    return [(t, x) for t, x in zip(ts, vals)]


# ------------------------------------------------------------------ probes


def probes() -> list[dict]:
    P = []
    add = P.append
    # --- event-time trigger (the default of time windows)
    add(case("probe_event_time_default", tumbling(10), seq(1, 5, 12, 25)))
    add(case("probe_event_time_explicit_sliding", sliding(10, 5), seq(1, 6, 12, 30), trigger=EVENT_TIME))
    add(case("probe_event_time_bound", tumbling(10), seq(3, 8, 11, 12, 13, 14), bound=3))
    add(case("probe_out_of_order_within_bound", tumbling(10), seq(5, 12, 2, 9, 14, 1), bound=4))
    add(case("probe_equal_timestamps", tumbling(10), seq(4, 4, 4, 9, 9, 10, 10), trigger=count(2)))
    add(case("probe_negative_timestamps", tumbling(10), seq(-15, -11, -10, -1, 0, 3)))
    add(case("probe_negative_offset_sliding", sliding(8, 4, -3), seq(-9, -4, -1, 0, 5, 9)))
    add(case("probe_sliding_slide_not_dividing", sliding(10, 4), seq(1, 3, 7, 11, 13)))
    add(case("probe_sliding_gaps_slide_gt_size", sliding(3, 5), seq(0, 2, 3, 4, 5, 8, 11)))
    add(case("probe_sliding_count_window_order", sliding(9, 3), seq(4, 5, 10), trigger=count(1)))
    # --- lateness and the late side output
    add(case("probe_late_beyond_lateness", tumbling(10), seq(2, 15, 4, 21)))
    add(case("probe_late_within_lateness", tumbling(10), seq(2, 5, 13, 4, 16, 7, 22), lateness=5))
    add(case("probe_lateness_boundary", tumbling(10), seq(2, 12, 3, 13, 4), lateness=3))
    add(case("probe_late_sliding_partial", sliding(10, 5), seq(2, 11, 8, 21, 14, 6)))
    add(case("probe_late_count_trigger", tumbling(10), seq(2, 5, 14, 3, 6, 7, 30), trigger=count(2), lateness=6))
    add(case("probe_purging_event_time_late", tumbling(10), seq(2, 5, 12, 7, 8, 25),
             trigger=purging(EVENT_TIME), lateness=5))
    # --- count trigger
    add(case("probe_count_tumbling", tumbling(10), seq(1, 2, 3, 4, 5, 11, 12), trigger=count(2)))
    add(case("probe_count_purging", tumbling(10), seq(1, 2, 3, 4, 5, 11), trigger=purging(count(2))))
    add(case("probe_count_two_keys", tumbling(10), [("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("b", 4, 4),
                                                     ("a", 5, 5), ("b", 12, 6)], trigger=count(2)))
    # --- continuous trigger
    add(case("probe_continuous_jump", tumbling(20), seq(1, 2, 50), trigger=continuous(4)))
    add(case("probe_continuous_steps", tumbling(12), seq(0, 3, 5, 7, 9, 12, 13), trigger=continuous(3)))
    add(case("probe_continuous_negative_ts", tumbling(20, 0), seq(-19, -7, -3, 2, 30), trigger=continuous(4)))
    add(case("probe_continuous_interval_gt_window", tumbling(5), seq(1, 2, 7, 20), trigger=continuous(8)))
    add(case("probe_continuous_late", tumbling(10), seq(1, 14, 3, 25), trigger=continuous(3), lateness=5))
    add(case("probe_continuous_purging", tumbling(12), seq(1, 2, 4, 5, 9, 30), trigger=purging(continuous(3))))
    add(case("probe_continuous_sliding", sliding(8, 4), seq(1, 5, 6, 30), trigger=continuous(3)))
    # --- delta trigger
    add(case("probe_delta_tie_no_fire", tumbling(100), seq(1, 2, 3, 4, v=[1.0, 2.0, 3.0, 3.5]), trigger=delta(1.0)))
    add(case("probe_delta_fires_and_resets", tumbling(100), seq(1, 2, 3, 4, 5, 6, v=[1.0, 1.5, 2.5, 3.0, 4.0, 1.0]),
             trigger=delta(1.0)))
    add(case("probe_delta_purging", tumbling(100), seq(1, 2, 3, 4, 5, v=[0.0, 3.0, 3.5, 0.5, 7.0]),
             trigger=purging(delta(2.0))))
    add(case("probe_delta_global", GLOBAL, [("a", 1, 0), ("b", 2, 5), ("a", 3, 2.5), ("b", 4, 2), ("a", 5, 3)],
             trigger=delta(2.0)))
    # --- purge then later rows; an empty window
    add(case("probe_purge_then_later_rows", tumbling(10), seq(1, 2, 3, 4, 5),
             trigger=purging(any_of(count(2), EVENT_TIME))))
    add(case("probe_purged_window_does_not_fire", tumbling(10), seq(1, 2, 3, 4, 15),
             trigger=any_of(purging(count(2)), EVENT_TIME)))
    # --- any (OR), not in Flink: the oracle's AnyTrigger
    add(case("probe_any_count_event_time", tumbling(10), seq(1, 2, 3, 4, 5, 12), trigger=any_of(count(3), EVENT_TIME)))
    add(case("probe_any_two_counts", tumbling(20), seq(1, 2, 3, 4, 5, 6, 7), trigger=any_of(count(2), count(3))))
    add(case("probe_any_delta_count_global", GLOBAL, seq(1, 2, 3, 4, 5, 6, v=[1.0, 1.0, 4.0, 4.5, 4.5, 0.0]),
             trigger=any_of(delta(2.0), count(4))))
    add(case("probe_any_continuous_count", tumbling(12), seq(1, 2, 3, 9, 20), trigger=any_of(continuous(4), count(2))))
    # --- evictors
    add(case("probe_evict_count_before", tumbling(10), seq(1, 2, 3, 4, 12), trigger=count(2), evictor=ev_count(1)))
    add(case("probe_evict_count_after", tumbling(10), seq(1, 2, 3, 4, 12), trigger=count(2), evictor=ev_count(1, True)))
    add(case("probe_evict_time_before", tumbling(20), seq(1, 9, 4, 12, 30), evictor=ev_time(5), bound=10))
    add(case("probe_evict_time_after", tumbling(20), seq(1, 3, 8, 10, 14, 30), trigger=count(2), evictor=ev_time(4, True)))
    add(case("probe_evict_delta_tie", tumbling(20), seq(1, 2, 3, 4, 30, v=[1.0, 2.0, 3.0, 2.0, 0.0]),
             evictor=ev_delta(1.0)))
    add(case("probe_evict_delta_after", tumbling(20), seq(1, 2, 3, 4, v=[1.0, 4.0, 2.5, 3.0]), trigger=count(2),
             evictor=ev_delta(1.0, True)))
    add(case("probe_evict_everything_time0", tumbling(10), seq(1, 2, 3, 12), evictor=ev_time(0)))
    add(case("probe_evict_everything_delta0", tumbling(10), seq(1, 2, 12), trigger=count(1), evictor=ev_delta(0.0)))
    add(case("probe_evict_everything_count0", tumbling(10), seq(1, 2, 3, 12), trigger=count(2), evictor=ev_count(0)))
    add(case("probe_evict_everything_after_then_on_time", tumbling(10), seq(1, 2, 12),
             trigger=any_of(count(2), EVENT_TIME), evictor=ev_count(0, True)))
    add(case("probe_evictor_late_firing", tumbling(10), seq(1, 2, 3, 15, 4, 5), evictor=ev_count(2), lateness=6))
    add(case("probe_global_purging_count_leftover", GLOBAL, seq(1, 2, 3, 4, 5, 6, 7), trigger=purging(count(3))))
    add(case("probe_evict_count_global", GLOBAL, seq(1, 2, 3, 4, 5, 6), trigger=count(3), evictor=ev_count(2)))
    # --- sessions (merging) with each trigger that can merge
    add(case("probe_session_default", session(5), seq(1, 3, 10, 20, 22)))
    add(case("probe_session_touching_gap_merges", session(5), seq(0, 5, 11, 16, 22)))
    add(case("probe_session_merge_order_by_start", session(5), seq(10, 1, 5), bound=20))
    add(case("probe_session_merge_order_by_hash", session(5), seq(0, 8, 4), bound=20))
    add(case("probe_session_count_merge", session(5), seq(1, 2, 12, 7, 20), trigger=count(3), bound=20))
    add(case("probe_session_purging_count", session(4), seq(1, 2, 3, 4, 5, 20), trigger=purging(count(2))))
    add(case("probe_session_continuous_merge", session(6), seq(1, 12, 7, 30), trigger=continuous(4), bound=10))
    add(case("probe_session_any_count_event_time", session(4), seq(1, 2, 3, 6, 20), trigger=any_of(count(2), EVENT_TIME)))
    add(case("probe_session_evictor_merge", session(5), seq(1, 3, 12, 8, 30), evictor=ev_count(2), bound=20))
    add(case("probe_session_late_within_lateness", session(3), seq(1, 2, 10, 3, 20), lateness=6))
    # --- multiple keys: timers of the same time
    add(case("probe_two_keys_same_end", tumbling(10), [("b", 1, 1), ("a", 2, 2), ("c", 3, 3), ("a", 14, 4)]))
    # --- combinations Flink refuses
    add(case("probe_refused_session_delta", session(5), seq(1, 2), trigger=delta(1.0)))
    add(case("probe_refused_session_any_with_delta", session(5), seq(1, 2), trigger=any_of(count(2), delta(1.0))))
    add(case("probe_refused_global_event_time", GLOBAL, seq(1, 2), trigger=EVENT_TIME))
    add(case("probe_refused_negative_lateness", tumbling(10), seq(1, 2), lateness=-1))
    add(case("probe_refused_tumbling_offset", tumbling(5, 5), seq(1, 2)))
    add(case("probe_refused_sliding_offset", sliding(10, 4, 4), seq(1, 2)))
    return P


# ------------------------------------------------------------------ random cases

KEYS = "abc"


def half(rng: random.Random, lo: float, hi: float) -> float:
    """A multiple of 0.5 in [lo, hi]."""
    return rng.randint(int(lo * 2), int(hi * 2)) / 2


def rand_rows(rng: random.Random) -> list[list]:
    n = rng.randint(3, 25)
    nkeys = rng.randint(1, 3)
    t = rng.randint(-20, 10)
    step = rng.randint(1, max(1, min(6, 90 // n)))     # keeps most timestamps within -20..80
    disorder = rng.choice([0.0, 0.15, 0.3, 0.5])
    rows = []
    for _ in range(n):
        t += rng.randint(0, step)
        ts = t - rng.randint(1, 12) if rng.random() < disorder else t
        rows.append([KEYS[rng.randrange(nkeys)], min(max(ts, -20), 80), half(rng, 0, 5)])
    if rng.random() < 0.1:          # a watermark jump at the end
        rows.append([KEYS[0], min(t + rng.randint(15, 40), 80), half(rng, 0, 5)])
    return rows


def rand_window(rng: random.Random) -> dict:
    k = rng.choices(["tumbling", "sliding", "session", "global"], [30, 25, 25, 20])[0]
    if k == "tumbling":
        size = rng.randint(4, 20)
        off = 0 if rng.random() < 0.5 else rng.randint(-(size - 1), size - 1)
        return tumbling(size, off)
    if k == "sliding":
        size = rng.randint(4, 20)
        divs = [d for d in range(1, size) if size % d == 0 and d >= 2]
        r = rng.random()
        if r < 0.45 and divs:
            slide = rng.choice(divs)
        elif r < 0.9:
            slide = rng.choice([d for d in range(2, size) if size % d] or [size - 1])
        else:
            slide = rng.randint(size + 1, size + 6)      # gaps between windows
        off = 0 if rng.random() < 0.5 else rng.randint(-(slide - 1), slide - 1)
        return sliding(size, slide, off)
    if k == "session":
        return session(rng.randint(2, 8))
    return dict(GLOBAL)


def base_trigger(rng: random.Random, global_window: bool) -> dict:
    kinds = ["count", "delta"] if global_window else ["event_time", "count", "continuous", "delta"]
    k = rng.choice(kinds)
    if k == "event_time":
        return dict(EVENT_TIME)
    if k == "count":
        return count(rng.randint(1, 4))
    if k == "continuous":
        return continuous(rng.randint(2, 8))
    return delta(half(rng, 0.5, 3.0))


def rand_trigger(rng: random.Random, window: dict):
    glob = window["kind"] == "global"
    sess = window["kind"] == "session"

    def pick():
        t = base_trigger(rng, glob)
        # sessions: Flink refuses a trigger that cannot merge (delta); keep a few of those
        while sess and t["kind"] == "delta" and rng.random() < 0.85:
            t = base_trigger(rng, glob)
        return t

    r = rng.random()
    if not glob and r < 0.2:
        return None
    if r < 0.6:
        return pick()
    if r < 0.75:
        return purging(pick())
    subs = [pick() for _ in range(rng.randint(2, 3))]
    if rng.random() < 0.3:
        subs[0] = purging(subs[0])
    return any_of(*subs)


def rand_evictor(rng: random.Random):
    r = rng.random()
    after = rng.random() < 0.5
    if r < 0.45:
        return None
    if r < 0.65:
        return ev_count(rng.randint(0, 4), after)
    if r < 0.85:
        return ev_time(rng.randint(0, 10), after)
    return ev_delta(half(rng, 0.0, 3.0), after)


def random_case(rng: random.Random, i: int) -> dict:
    window = rand_window(rng)
    return {"name": f"r{i}", "window": window, "trigger": rand_trigger(rng, window),
            "evictor": rand_evictor(rng), "lateness": 0 if rng.random() < 0.4 else rng.randint(1, 8),
            "bound": rng.randint(0, 6), "rows": rand_rows(rng)}


def generate(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return probes() + [random_case(rng, i) for i in range(n)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300, help="random cases (after the probes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args(argv)
    cases = generate(args.n, args.seed)
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    with open(args.out, "w") as f:
        f.write('{"cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(", ", ": ")) for c in cases))
        f.write("\n]}\n")
    print(f"wingen: {len(cases)} cases ({len(cases) - args.n} probes) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
