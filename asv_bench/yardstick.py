"""The yardstick: hand-specialised Numba loops for the four benchmark patterns.

Each loop knows its one pattern (``shared/bench/patterns.json``) by heart: no NFA, no
condition interpreter, per-key state in a few scalars or small arrays. A general engine is
measured against them (target: colcep >= 0.4x the yardstick on every pattern, measured in the
same run). The input is grouped by key first, with an O(n) stable counting sort, so every
key's events are contiguous and in arrival (= time) order.

    from yardstick import run
    rows = run("P4", ticks)   # int64 [n_matches, 3] of (a, b, c) row numbers

``run`` does what a colcep scan does, minus building the Arrow output: dictionary-encode the
key column, take the columns as numpy arrays, group by key, run the loop, return the matches
as row numbers of the input (P1 and P4: one row per stage; P2 and P3: first and last event,
``(start_row, end_row)``). ``prepare`` + ``KERNELS`` time the loop alone.

Semantics are Flink CEP's (as colcep's): ``within`` means ``ts(last) - ts(first) < within``;
P2 and P3 use skipPastLastEvent with Flink's hold-back of completed matches (a completed match
waits until no partial match that started before it is alive, then prunes every run that
started at or before its last event). ``tests/test_benchmarks.py`` checks the matches against
colcep's on generated ticks.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from limit_kernels import group_by_key  # the stable counting sort by key (asv_bench/ is on sys.path)

BIG = np.int64(2**62)

# the benchmark patterns' constants (shared/bench/patterns.json)
P1_A_VOL, P1_WITHIN = 800.0, 10_000
P2_A_VOL, P2_DROP, P2_WITHIN = 900.0, 0.999, 60_000
P3_A_VOL, P3_B_FRAC, P3_WITHIN = 1000.0, 0.8, 3_600_000
P4_A_VOL, P4_WITHIN = 600.0, 2_000


# ----------------------------------------------------------------------------- input
def encode(table: pa.Table, key: str = "name"):
    """(key codes int32, number of keys, ts int64, price float64, volume float64) of a tick table."""
    enc = table.column(key).combine_chunks()
    if not pa.types.is_dictionary(enc.type):
        enc = pc.dictionary_encode(enc)
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    ts = np.asarray(table.column("ts").to_numpy(), np.int64)
    price = np.asarray(table.column("price").to_numpy(), np.float64)
    volume = np.asarray(table.column("volume").to_numpy(), np.float64)
    return codes, len(enc.dictionary), ts, price, volume


@njit(cache=True, nogil=True)
def _room(out, n):
    """``out`` with space for row ``n`` (doubling)."""
    if n < out.shape[0]:
        return out
    new = np.empty((2 * out.shape[0], out.shape[1]), np.int64)
    new[:n] = out[:n]
    return new


# ----------------------------------------------------------------------------- P1
@njit(cache=True, nogil=True)
def p1(offsets, rows, ts, price, volume):
    """a(volume > 800) next b(price > a.price) next c(price > b.price) within 10 s, noSkip:
    three consecutive events of a key. Returns (a, b, c) rows."""
    out = np.empty((1024, 3), np.int64)
    n = 0
    for k in range(offsets.shape[0] - 1):
        for m in range(offsets[k] + 2, offsets[k + 1]):
            if (volume[m - 2] > P1_A_VOL and price[m - 1] > price[m - 2] and price[m] > price[m - 1]
                    and ts[m] - ts[m - 2] < P1_WITHIN):
                out = _room(out, n)
                out[n, 0] = rows[m - 2]
                out[n, 1] = rows[m - 1]
                out[n, 2] = rows[m]
                n += 1
    return out[:n]


# ----------------------------------------------------------------------------- P2 / P3
# A run is one start event (a / a1). Its NFA branches (one per prefix of the Kleene sequence)
# collapse into a few numbers, because the earliest branch to complete is the only one that
# counts: skipPastLastEvent prunes the rest with the first released match.
# Per key, runs live in arrays indexed by start order: status 0 dead, 1 alive, 2 completed
# (match held back); ``alive`` lists the alive ones in any order (swap-remove).

@njit(cache=True, nogil=True)
def _drop_alive(r, alive, where, n_alive):
    i = where[r]
    last = alive[n_alive - 1]
    alive[i] = last
    where[last] = i
    return n_alive - 1


@njit(cache=True, nogil=True)
def _settle(t, within, head, tail, r_start, r_ts, status, r_end, alive, where, n_alive, rows, out, n):
    """Flink's advanceTime + processMatchesAccordingToSkipStrategy for one key at time ``t``:
    from the oldest run on, drop dead runs, time out alive ones, release a completed run's match
    (then prune every run that started at or before its last event); stop at the first alive run
    still inside its window, which holds back every later completed match."""
    while head < tail:
        s = status[head]
        if s == 0:
            head += 1
        elif s == 2:
            end = r_end[head]
            out = _room(out, n)
            out[n, 0] = rows[r_start[head]]
            out[n, 1] = rows[end]
            n += 1
            while head < tail and r_start[head] <= end:
                if status[head] == 1:
                    n_alive = _drop_alive(head, alive, where, n_alive)
                status[head] = 0
                head += 1
        elif t - r_ts[head] >= within:
            n_alive = _drop_alive(head, alive, where, n_alive)
            status[head] = 0
            head += 1
        else:
            break
    return head, n_alive, out, n


@njit(cache=True, nogil=True)
def _skip_past_last(p3, offsets, rows, ts, price, volume):
    """P2 (p3=False): a(vol > 900) followedBy b+(price > a.price) followedBy c(price < 0.999 * last(b).price)
    within 60 s. A run completes at the first event after its first b whose price is below 0.999 x the
    highest b price so far (the last b of some prefix).
    P3 (p3=True): a1(vol > 1000) followedBy ai+(price > mean of a1 and the ai so far) followedBy
    b(vol < 0.8 * last(ai).volume) within 1 h. The ai sequence is deterministic (take when the condition
    holds, else ignore); a run completes at the first event after its first ai whose volume is below
    0.8 x the largest ai volume so far."""
    a_vol = P3_A_VOL if p3 else P2_A_VOL
    within = P3_WITHIN if p3 else P2_WITHIN
    longest = 1
    for k in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[k + 1] - offsets[k])
    r_start = np.empty(longest, np.int64)  # grouped position of the start event
    r_ts = np.empty(longest, np.int64)
    status = np.empty(longest, np.int8)
    r_end = np.empty(longest, np.int64)
    x0 = np.empty(longest)  # P2: a.price            P3: a1.price
    x1 = np.empty(longest)  # P2: max b price (-1)   P3: sum of ai prices
    x2 = np.empty(longest)  # P3: count of ai
    x3 = np.empty(longest)  # P3: max ai volume
    alive = np.empty(longest, np.int64)
    where = np.empty(longest, np.int64)
    out = np.empty((1024, 2), np.int64)
    n = 0
    for k in range(offsets.shape[0] - 1):
        head = 0
        tail = 0
        n_alive = 0
        deadline = BIG
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            p = price[m]
            v = volume[m]
            if t >= deadline:
                head, n_alive, out, n = _settle(t, within, head, tail, r_start, r_ts, status, r_end, alive, where,
                                                n_alive, rows, out, n)
                deadline = r_ts[head] + within if head < tail else BIG
            completed = False
            i = 0
            while i < n_alive:
                r = alive[i]
                if p3:
                    c = x2[r]
                    done = c > 0.0 and v < P3_B_FRAC * x3[r]
                    if not done and p > (x1[r] + x0[r]) / (c + 1.0):
                        x1[r] += p
                        x2[r] = c + 1.0
                        if v > x3[r]:
                            x3[r] = v
                else:
                    mb = x1[r]
                    done = mb > 0.0 and p < mb * P2_DROP
                    if not done and p > x0[r] and p > mb:
                        x1[r] = p
                if done:
                    status[r] = 2
                    r_end[r] = m
                    n_alive = _drop_alive(r, alive, where, n_alive)
                    completed = True
                else:
                    i += 1
            if v > a_vol:
                r = tail
                tail += 1
                r_start[r] = m
                r_ts[r] = t
                status[r] = 1
                x0[r] = p
                x1[r] = 0.0 if p3 else -1.0
                x2[r] = 0.0
                x3[r] = -1.0
                alive[n_alive] = r
                where[r] = n_alive
                n_alive += 1
                if head == r:
                    deadline = t + within
            if completed:
                head, n_alive, out, n = _settle(t, within, head, tail, r_start, r_ts, status, r_end, alive, where,
                                                n_alive, rows, out, n)
                deadline = r_ts[head] + within if head < tail else BIG
        # end of input: the final watermark times out every alive run and releases the rest
        head, n_alive, out, n = _settle(BIG, within, head, tail, r_start, r_ts, status, r_end, alive, where,
                                        n_alive, rows, out, n)
    return out[:n]


@njit(cache=True, nogil=True)
def p2(offsets, rows, ts, price, volume):
    return _skip_past_last(False, offsets, rows, ts, price, volume)


@njit(cache=True, nogil=True)
def p3(offsets, rows, ts, price, volume):
    return _skip_past_last(True, offsets, rows, ts, price, volume)


# ----------------------------------------------------------------------------- P4
@njit(cache=True, nogil=True)
def p4(offsets, rows, ts, price, volume):
    """a(vol > 600) followedByAny b(price > a.price) followedByAny c(price > b.price) within 2 s, noSkip:
    every triple i < j < m of one key with vol_i > 600, p_i < p_j < p_m and ts_m - ts_i < 2 s, materialised
    as (a, b, c) rows. Per key a sliding window [lo, m); an event m as c walks the b's below it and, for each,
    the a's before it (a-flags precomputed, so the inner test is two loads)."""
    out = np.empty((1 << 16, 3), np.int64)
    n = 0
    is_a = volume > P4_A_VOL
    for k in range(offsets.shape[0] - 1):
        lo = offsets[k]
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            while t - ts[lo] >= P4_WITHIN:
                lo += 1
            w = m - lo
            if n + w * w // 2 > out.shape[0]:  # room for every triple this event could close
                new = np.empty((max(2 * out.shape[0], n + w * w // 2), 3), np.int64)
                new[:n] = out[:n]
                out = new
            pm = price[m]
            rm = rows[m]
            for j in range(lo + 1, m):
                pj = price[j]
                if pj < pm:
                    rj = rows[j]
                    for i in range(lo, j):
                        if is_a[i] and price[i] < pj:
                            out[n, 0] = rows[i]
                            out[n, 1] = rj
                            out[n, 2] = rm
                            n += 1
    return out[:n]


# ----------------------------------------------------------------------------- entry points
KERNELS = {"P1": p1, "P2": p2, "P3": p3, "P4": p4}


def prepare(table: pa.Table, key: str = "name"):
    """The grouped arrays a kernel takes: (offsets, rows, ts, price, volume)."""
    codes, nkeys, ts, price, volume = encode(table, key)
    return group_by_key(codes, nkeys, ts, price, volume)


def run(pattern: str, table: pa.Table, key: str = "name") -> np.ndarray:
    """Matches of benchmark pattern ``pattern`` ("P1".."P4") over ``table``, from the Arrow table
    to the match rows: encode, group, loop."""
    return KERNELS[pattern](*prepare(table, key))


def warm_up() -> None:
    """Compile (or load from the disk cache) every loop."""
    n = 64
    codes = np.zeros(n, np.int32)
    ts = np.arange(n, dtype=np.int64)
    price = np.linspace(1.0, 2.0, n)
    volume = np.full(n, 2000.0)
    g = group_by_key(codes, 1, ts, price, volume)
    for f in KERNELS.values():
        f(*g)
