"""Contract-exact limit loops: hand-written Numba loops for the benchmark patterns P1-P5 that
materialise EVERY event of every match, in colcep's output order, so the comparison with
``colcep.match`` is like for like. (The vendored loops of ``limit_kernels.py`` do less: P2 / P3
give only (first row, last row) of a match, P4 / P5 give the matches of one event in another
order than Flink's.)

    from limit_exact import run, best
    m_off, e_row, e_stage = run("P2", table)   # Arrow table -> matches, as colcep gives them
    seconds, n_matches = best("P2", table)     # best of 3, the Arrow table to the matches

Output, as colcep's ``match`` (one row per matched event, ``match_id`` in emission order):
``m_off`` (int64, n_matches + 1 offsets into the event arrays), ``e_row`` (int64, the input row
of each event) and ``e_stage`` (int8, the event's stage index in pattern order: 0 = a / a1, ...).
Matches come in emission order: by the input row at which the match was emitted (its last event,
or, for a match held back by skipPastLastEvent, the row at which it was released; the end of
input last, keys in first-seen order), then, for matches emitted at one row, oldest start event
first, ties by the events' rows compared lexicographically (colcep's rule, Flink's order).
Within a match events are in stage order, arrival order within a stage.

The loops (constants from ``shared/bench/patterns.json`` / ``colcep.tools.examples``):

- P1, arrival order: the vendored ``p1_emit`` (one match per c event, so its order is already
  the emission order), its (n, 3) rows laid out flat.
- P2 / P3, input grouped by key (``group_by_key``): the runs-with-hold-back logic of the vendored
  ``_skip_past_last_grouped``, copied because it must also record the row at which each match is
  released (the vendored file stays as shipped, the reference it is), (one run per start event; a completed run waits while a run that
  started earlier is alive, then prunes every run started at or before its last event), which
  records each released match as (start, end, emitting row). Afterwards the records are put in
  emission order (a stable sort by emitting row) and each match is written out. Of the branches
  of a run that complete at one event (one per prefix of the Kleene sequence) colcep emits the
  longest (its next event precedes the common last one; the skip strategy prunes the others), so
  writing a match finds that prefix: P2 scans the key's events back from c to the last b whose
  price * 0.999 is above c's (b's are all the key's events after a priced above it; ones after
  that b are not in the match), P3 replays the deterministic ai sequence and cuts it after the
  last ai with c.volume < 0.8 * ai.volume. Measured on 10^6 ticks this form is faster than an
  arrival-order one (``p2_run`` plus a walk back along a per-key chain of rows: ~20 % slower),
  and the loop must not reassign its output arrays (growing them in the loop cost 2x).
- P4, arrival order: like the vendored ``p4_emit`` (a ring per key of the events inside the
  window), but for an event c it first gathers the ring's events priced below c, then walks
  a (ascending) x b (ascending, above a): the matches of one c come out oldest a first, then by b.
- P5, grouped: the vendored heap loop ``p5_grouped_emit`` (a min-heap of thresholds per key;
  it pops the matches of one b in threshold order), then the matches sorted by (b row, a row).
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from numba import njit

import limit_kernels as lk
from limit import P5_MULT, P5_VOLUME, WITHIN, prepare

BIG = np.int64(2**62)

# the benchmark patterns' constants (shared/bench/patterns.json, colcep.tools.examples)
P1_A_VOL = 800.0                      # (as hard-wired in limit_kernels.p1_emit)
P2_A_VOL, P2_DROP = 900.0, 0.999      # c: price < last(b).price * 0.999
P3_A_VOL, P3_B_FRAC = 1000.0, 0.8     # b: volume < 0.8 * last(ai).volume
P4_A_VOL = 600.0
STAGES = {"P1": ("a", "b", "c"), "P2": ("a", "b", "c"), "P3": ("a1", "ai", "b"), "P4": ("a", "b", "c"),
          "P5": ("a", "b")}


# ----------------------------------------------------------------------------- fixed-length matches
@njit(cache=True, nogil=True)
def _flat(rows):
    """(n, w) rows of n matches of w events each (stage order) -> (m_off, e_row, e_stage)."""
    n, w = rows.shape
    m_off = np.empty(n + 1, np.int64)
    for i in range(n + 1):
        m_off[i] = i * w
    e_stage = np.empty(n * w, np.int8)
    for i in range(n):
        for s in range(w):
            e_stage[i * w + s] = s
    return m_off, np.ascontiguousarray(rows).reshape(n * w), e_stage


# ----------------------------------------------------------------------------- P2 / P3
@njit(cache=True, nogil=True)
def _write_run(which, sp, ep, rows, price, volume, e_row, e_stage, ne):
    """Write the match of the run that started at grouped position ``sp`` and completed at ``ep``
    (the first event at which any of its branches completed): a / a1, the Kleene events of the
    longest branch that completes at ``ep``, then ``ep``."""
    need = ne + ep - sp + 1
    if need > e_row.shape[0]:
        size = max(2 * e_row.shape[0], need)
        r2 = np.empty(size, np.int64)
        s2 = np.empty(size, np.int8)
        r2[:ne] = e_row[:ne]
        s2[:ne] = e_stage[:ne]
        e_row, e_stage = r2, s2
    e_row[ne] = rows[sp]
    e_stage[ne] = 0
    ne += 1
    if which == 2:
        # b: every event after a priced above a (the loop cannot skip one); the branch that
        # completes is the longest whose last b has ep.price < b.price * 0.999
        pa_ = price[sp]
        pe = price[ep]
        last = sp
        q = ep - 1
        while q > sp:
            pq = price[q]
            if pq > pa_ and pe < pq * P2_DROP:
                last = q
                break
            q -= 1
        for q in range(sp + 1, last + 1):
            if price[q] > pa_:
                e_row[ne] = rows[q]
                e_stage[ne] = 1
                ne += 1
    else:
        # ai: replay the deterministic sequence (an event is taken when priced above the mean of
        # a1 and the ai so far); keep it up to the last ai with ep.volume < 0.8 * ai.volume
        pa1 = price[sp]
        ve = volume[ep]
        s = 0.0
        c = 0.0
        keep = ne
        for q in range(sp + 1, ep):
            pq = price[q]
            if pq > (s + pa1) / (c + 1.0):
                s += pq
                c += 1.0
                e_row[ne] = rows[q]
                e_stage[ne] = 1
                ne += 1
                if ve < P3_B_FRAC * volume[q]:
                    keep = ne
        ne = keep
    e_row[ne] = rows[ep]
    e_stage[ne] = 2
    ne += 1
    return e_row, e_stage, ne


@njit(cache=True, nogil=True, inline="always")
def _unlist(i, act, actpos, nact):
    """Drop the alive run at position ``i`` of the alive list (the last one takes its place)."""
    last = act[nact - 1]
    act[i] = last
    actpos[last] = i
    return nact - 1


@njit(cache=True, nogil=True, inline="always")
def _settle(t, within, g, head, tail, r_pos, r_ts, status, r_end, act, actpos, nact, rec_s, rec_e, rec_g, nm):
    """Flink's advanceTime + processMatchesAccordingToSkipStrategy for one key at time ``t``
    (``limit_kernels._release``), releasing matches at input row ``g``: from the oldest run on,
    drop dead runs, time out alive ones, record a completed run's match (start, end, ``g``), then
    prune every run that started at or before its last event; stop at the first alive run
    inside its window."""
    while head < tail:
        s = status[head]
        if s == 0:
            head += 1
        elif s == 2:
            ep = r_end[head]
            rec_s[nm] = r_pos[head]
            rec_e[nm] = ep
            rec_g[nm] = g
            nm += 1
            while head < tail and r_pos[head] <= ep:
                if status[head] == 1:
                    nact = _unlist(actpos[head], act, actpos, nact)
                status[head] = 0
                head += 1
        elif t - r_ts[head] >= within:
            nact = _unlist(actpos[head], act, actpos, nact)
            status[head] = 0
            head += 1
        else:
            break
    return head, nact, nm


@njit(cache=True, nogil=True)
def skip_past_last_exact(which, offsets, rows, ts, price, volume, within):
    """P2 (which=2): a(vol > 900) followedBy b+(price > a.price) followedBy c(price < last(b).price
    * 0.999), P3 (which=3): a1(vol > 1000) followedBy ai+(price > mean of a1 and the ai so far)
    followedBy b(vol < 0.8 * last(ai).volume); skipPastLastEvent; input grouped by key
    (``group_by_key``). The run logic is ``limit_kernels._skip_past_last_grouped``'s: per key, runs
    (one per start event) in start order, status 0 dead / 1 alive / 2 completed (held back), and
    a list of the alive ones. A released match is recorded as (start, end, emitting row); at the
    end the records are put in emission order (stable by emitting row: one row is one key's, in
    release order; the end of input, row n, in key order) and written out.
    Returns (m_off, e_row, e_stage)."""
    n = price.shape[0]
    nkeys = offsets.shape[0] - 1
    seg = 1
    for k in range(nkeys):
        seg = max(seg, offsets[k + 1] - offsets[k])
    r_pos = np.empty(seg, np.int64)
    r_ts = np.empty(seg, np.int64)
    status = np.empty(seg, np.int8)
    r_end = np.empty(seg, np.int64)
    f0 = np.empty(seg)  # P2: a price          P3: a1 price
    f1 = np.empty(seg)  # P2: max b price      P3: sum of ai prices
    f2 = np.empty(seg)  # P3: count of ai
    f3 = np.empty(seg)  # P3: max ai volume
    act = np.empty(seg, np.int64)
    actpos = np.empty(seg, np.int64)
    # at most one match per start event, so one record per row at most: nothing grows in the
    # loop (the pages are touched only as records are written)
    rec_s = np.empty(n, np.int64)
    rec_e = np.empty(n, np.int64)
    rec_g = np.empty(n, np.int64)
    nm = 0
    a_min = P2_A_VOL if which == 2 else P3_A_VOL
    for k in range(nkeys):
        head = 0
        tail = 0
        nact = 0
        deadline = BIG
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            p = price[m]
            v = volume[m]
            if t >= deadline:  # advanceTime: the oldest run times out
                head, nact, nm = _settle(t, within, rows[m], head, tail, r_pos, r_ts, status, r_end, act, actpos,
                                         nact, rec_s, rec_e, rec_g, nm)
                deadline = r_ts[head] + within if head < tail else BIG
            done = False  # doProcess: advance the alive runs
            i = 0
            while i < nact:
                r = act[i]
                hit = False
                if which == 2:
                    mb = f1[r]
                    if mb > 0.0 and p < mb * P2_DROP:
                        hit = True
                    elif p > f0[r] and p > mb:
                        f1[r] = p
                else:
                    c = f2[r]
                    if c > 0.0 and v < P3_B_FRAC * f3[r]:
                        hit = True
                    elif p > (f1[r] + f0[r]) / (c + 1.0):
                        f1[r] += p
                        f2[r] = c + 1.0
                        if v > f3[r]:
                            f3[r] = v
                if hit:
                    status[r] = 2
                    r_end[r] = m
                    nact = _unlist(i, act, actpos, nact)
                    done = True
                else:
                    i += 1
            if v > a_min:  # the start state takes a new run
                r = tail
                tail += 1
                r_pos[r] = m
                r_ts[r] = t
                status[r] = 1
                f0[r] = p
                f1[r] = -1.0 if which == 2 else 0.0
                f2[r] = 0.0
                f3[r] = -1.0
                act[nact] = r
                actpos[r] = nact
                nact += 1
                if head == tail - 1:
                    deadline = t + within
            if done:  # processMatchesAccordingToSkipStrategy
                head, nact, nm = _settle(t, within, rows[m], head, tail, r_pos, r_ts, status, r_end, act, actpos,
                                         nact, rec_s, rec_e, rec_g, nm)
                deadline = r_ts[head] + within if head < tail else BIG
        # the end of input (row n, after every row): the final watermark times out every run
        head, nact, nm = _settle(BIG, within, n, head, tail, r_pos, r_ts, status, r_end, act, actpos, nact,
                                 rec_s, rec_e, rec_g, nm)
    # emission order, then every event of each match
    order = np.argsort(rec_g[:nm], kind="mergesort")
    m_off = np.empty(nm + 1, np.int64)
    m_off[0] = 0
    e_row = np.empty(max(64, 4 * nm), np.int64)
    e_stage = np.empty(e_row.shape[0], np.int8)
    ne = 0
    for q in range(nm):
        i = order[q]
        e_row, e_stage, ne = _write_run(which, rec_s[i], rec_e[i], rows, price, volume, e_row, e_stage, ne)
        m_off[q + 1] = ne
    return m_off, e_row[:ne], e_stage[:ne]


# ----------------------------------------------------------------------------- P4
@njit(cache=True, nogil=True)
def p4_exact(key, ts, price, volume, nkeys, within, cap):
    """a(vol > 600) followedByAny b(price > a.price) followedByAny c(price > b.price) within
    ``within``, noSkip, in arrival order: every triple i < j < m of one key with vol_i > 600,
    p_i < p_j < p_m, ts_m - ts_i < within, emitted at m, those of one m by (i, j). Per key a
    ring of the events inside the window (row, ts, price, a-flag), as ``limit_kernels.p4_emit``.
    Returns (e_row flat, 3 per match in stage order; matches) or matches -1 when ``cap`` (a
    power of two, events of one key inside the window) is too small."""
    mask = cap - 1
    rr = np.empty((nkeys, cap), np.int64)
    rt = np.empty((nkeys, cap), np.int64)
    rp = np.empty((nkeys, cap))
    ra = np.empty((nkeys, cap), np.bool_)
    head = np.zeros(nkeys, np.int64)
    size = np.zeros(nkeys, np.int64)
    lp = np.empty(cap)  # this event's ring entries priced below it, oldest first
    lr = np.empty(cap, np.int64)
    la = np.empty(cap, np.bool_)
    e_row = np.empty(3 << 16, np.int64)
    ne = 0
    for e in range(price.shape[0]):
        k = key[e]
        t = ts[e]
        p = price[e]
        h = head[k]
        s = size[k]
        while s > 0 and t - rt[k, h] >= within:
            h = (h + 1) & mask
            s -= 1
        nl = 0
        for q in range(s):
            j = (h + q) & mask
            pj = rp[k, j]
            if pj < p:
                lp[nl] = pj
                lr[nl] = rr[k, j]
                la[nl] = ra[k, j]
                nl += 1
        if nl > 1:
            need = ne + 3 * (nl * (nl - 1) // 2)  # room for every triple this event could close
            if need > e_row.shape[0]:
                new = np.empty(max(2 * e_row.shape[0], need), np.int64)
                new[:ne] = e_row[:ne]
                e_row = new
            for x in range(nl - 1):
                if la[x]:
                    px = lp[x]
                    rx = lr[x]
                    for y in range(x + 1, nl):
                        if lp[y] > px:
                            e_row[ne] = rx
                            e_row[ne + 1] = lr[y]
                            e_row[ne + 2] = e
                            ne += 3
        if s == cap:
            return e_row[:0], -1
        j = (h + s) & mask
        rr[k, j] = e
        rt[k, j] = t
        rp[k, j] = p
        ra[k, j] = volume[e] > P4_A_VOL
        head[k] = h
        size[k] = s + 1
    return e_row[:ne], ne // 3


@njit(cache=True, nogil=True)
def _fixed3(e_row, nm):
    m_off = np.empty(nm + 1, np.int64)
    for i in range(nm + 1):
        m_off[i] = 3 * i
    e_stage = np.empty(3 * nm, np.int8)
    for i in range(nm):
        e_stage[3 * i] = 0
        e_stage[3 * i + 1] = 1
        e_stage[3 * i + 2] = 2
    return m_off, e_row, e_stage


# ----------------------------------------------------------------------------- P5
@njit(cache=True, nogil=True)
def p5_order(ab, n):
    """The (a_row, b_row) pairs of ``limit_kernels.p5_grouped_emit`` in emission order: by b row
    (where the match completes), then a row (the older start first)."""
    nm = ab.shape[0]
    code = np.empty(nm, np.int64)
    for i in range(nm):
        code[i] = ab[i, 1] * n + ab[i, 0]
    code.sort()
    m_off = np.empty(nm + 1, np.int64)
    e_row = np.empty(2 * nm, np.int64)
    e_stage = np.empty(2 * nm, np.int8)
    for i in range(nm):
        b = code[i] // n
        m_off[i] = 2 * i
        e_row[2 * i] = code[i] - b * n
        e_row[2 * i + 1] = b
        e_stage[2 * i] = 0
        e_stage[2 * i + 1] = 1
    m_off[nm] = 2 * nm
    return m_off, e_row, e_stage


# ----------------------------------------------------------------------------- entry points
def run_arrays(name: str, arrays: tuple, within: int | None = None) -> tuple:
    """The matches of benchmark pattern ``name`` over ``arrays`` (``limit.prepare``'s key codes,
    number of keys, ts, price, volume, in arrival order), as (m_off, e_row, e_stage)."""
    key, nkeys, ts, price, volume = arrays
    w = WITHIN[name] if within is None else within
    if name == "P1":
        return _flat(lk.p1_emit(key, ts, price, volume, nkeys, w))
    if name == "P4":
        cap = 64
        while True:
            e_row, nm = p4_exact(key, ts, price, volume, nkeys, w, cap)
            if nm >= 0:
                return _fixed3(e_row, nm)
            cap *= 2
    offsets, rows, gts, gp, gv = lk.group_by_key(key, nkeys, ts, price, volume)
    if name == "P5":
        return p5_order(lk.p5_grouped_emit(offsets, rows, gts, gp, gv, w, P5_VOLUME, P5_MULT), key.shape[0])
    if name in ("P2", "P3"):
        return skip_past_last_exact(int(name[1]), offsets, rows, gts, gp, gv, w)
    raise KeyError(f"unknown benchmark pattern {name!r}")


def run(name: str, table: pa.Table, within: int | None = None) -> tuple:
    """What a scan does, from the Arrow table to the matches: dictionary-encode the key
    (``name``), take the columns as numpy, group by key (P2, P3, P5), run the loop.
    Returns (m_off, e_row, e_stage), the matches exactly as ``colcep.match`` gives them."""
    return run_arrays(name, prepare(table), within)


def best(name: str, table: pa.Table, repeat: int = 3, within: int | None = None) -> tuple[float, int]:
    """(seconds, matches): the best of ``repeat`` runs of ``run`` (from the Arrow table)."""
    times, n = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        m_off = run(name, table, within)[0]
        times.append(time.perf_counter() - t0)
        n = m_off.shape[0] - 1
    return min(times), n


def warm_up() -> None:
    """Compile (or load from the disk cache) every loop."""
    tiny = pa.table({"name": ["x", "y"] * 8, "ts": np.arange(16, dtype=np.int64), "price": np.linspace(1, 2, 16),
                     "volume": np.full(16, 2000.0)})
    for name in WITHIN:
        run(name, tiny)
