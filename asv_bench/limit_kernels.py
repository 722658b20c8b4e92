# Vendored unchanged from the project reference material shared/bench/limit/kernels.py (the
# "limit kernels" issue 11 measures colcep against), so a fresh clone can measure the ratio.
# asv_bench/limit.py runs them; do not edit here.
"""Hand-specialised single-threaded Numba kernels for the four benchmark patterns.

Input: plain arrays in arrival order (key codes int32 from dictionary-encoding the
symbol, ts int64, price and volume float64). Every kernel makes ONE pass in
arrival order and keeps per-key state in small [nkeys, cap] arrays, so no
grouping or sorting by key is needed. Semantics: Flink CEP;
the skipPastLastEvent kernels (P2, P3) hold completed matches back exactly like
Flink's completedMatches queue, with the FIFO tie rule (see ../../conformance/SEMANTICS.md, point 15).

A kernel that runs out of its per-key capacity returns -1; the Python wrappers
retry with twice the capacity.
"""
import numpy as np
from numba import njit

BIG_TS = np.int64(2**62)


# ---------------------------------------------------------------- floors
@njit(cache=True, nogil=True)
def floor_one_column(volume):
    n = 0
    for i in range(volume.shape[0]):
        if volume[i] > 800.0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def floor_all_columns(key, ts, price, volume):
    n = 0
    for i in range(volume.shape[0]):
        if volume[i] > 800.0 and price[i] > 50.0 and ts[i] >= 0 and key[i] >= 0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def floor_key_state(key, price, nkeys):
    """One read-modify-write of per-key state per event (what any keyed pattern must at least do)."""
    last = np.zeros(nkeys)
    n = 0
    for i in range(price.shape[0]):
        k = key[i]
        if price[i] > last[k]:
            n += 1
        last[k] = price[i]
    return n


# ---------------------------------------------------------------- P1: a(vol>800) next b(p>a.p) next c(p>b.p), within 10 s, noSkip
@njit(cache=True, nogil=True)
def p1_count(key, ts, price, volume, nkeys, within):
    # per key: "the event before last was an a and the last one rose above it" (cand), its ts,
    # the last price, whether the last event was an a, and its ts
    cand = np.zeros(nkeys, np.bool_)
    cand_ts = np.zeros(nkeys, np.int64)
    last_p = np.full(nkeys, np.inf)
    last_a = np.zeros(nkeys, np.bool_)
    last_ts = np.zeros(nkeys, np.int64)
    n = 0
    for i in range(price.shape[0]):
        k = key[i]
        p = price[i]
        t = ts[i]
        up = p > last_p[k]
        if cand[k] and up and t - cand_ts[k] < within:
            n += 1
        # b must come within the window of a as well (Flink times the a-run out before b arrives)
        cand[k] = last_a[k] and up and t - last_ts[k] < within
        cand_ts[k] = last_ts[k]
        last_p[k] = p
        last_a[k] = volume[i] > 800.0
        last_ts[k] = t
    return n


@njit(cache=True, nogil=True)
def p1_emit(key, ts, price, volume, nkeys, within):
    prev1 = np.full(nkeys, -1, np.int64)
    prev2 = np.full(nkeys, -1, np.int64)
    out = np.empty((1024, 3), np.int64)
    n = 0
    for i in range(price.shape[0]):
        k = key[i]
        a, b = prev2[k], prev1[k]
        if a >= 0 and volume[a] > 800.0 and price[b] > price[a] and price[i] > price[b] and ts[i] - ts[a] < within:
            if n == out.shape[0]:
                new = np.empty((2 * n, 3), np.int64)
                new[:n] = out
                out = new
            out[n, 0] = a
            out[n, 1] = b
            out[n, 2] = i
            n += 1
        prev2[k] = b
        prev1[k] = i
    return out[:n]


# ---------------------------------------------------------------- P4: a(vol>600) followedByAny b(p>a.p) followedByAny c(p>b.p), within 2 s, noSkip
@njit(cache=True, nogil=True)
def p4_count(key, ts, price, volume, nkeys, within, cap):
    """Counts every triple i<j<k of one key with vol_i>600, p_i<p_j<p_k, ts_k-ts_i<within.

    Per key a ring of the events inside the window; for each event j it keeps cnt[j] =
    number of live a-events before j priced below it. An expiring a decrements the
    cnt of later events above it; a new event k adds sum(cnt[j] for p_j < p_k).
    """
    mask = cap - 1
    rp = np.empty((nkeys, cap))
    rt = np.empty((nkeys, cap), np.int64)
    ra = np.empty((nkeys, cap), np.bool_)
    rc = np.empty((nkeys, cap), np.int64)
    head = np.zeros(nkeys, np.int64)
    size = np.zeros(nkeys, np.int64)
    total = 0
    for e in range(price.shape[0]):
        k = key[e]
        t = ts[e]
        p = price[e]
        h = head[k]
        s = size[k]
        while s > 0 and t - rt[k, h] >= within:
            if ra[k, h]:
                pi = rp[k, h]
                for q in range(1, s):
                    j = (h + q) & mask
                    if rp[k, j] > pi:
                        rc[k, j] -= 1
            h = (h + 1) & mask
            s -= 1
        acc = 0
        below_a = 0
        for q in range(s):
            j = (h + q) & mask
            if rp[k, j] < p:
                acc += rc[k, j]
                if ra[k, j]:
                    below_a += 1
        total += acc
        if s == cap:
            return -1
        j = (h + s) & mask
        rp[k, j] = p
        rt[k, j] = t
        ra[k, j] = volume[e] > 600.0
        rc[k, j] = below_a
        head[k] = h
        size[k] = s + 1
    return total


@njit(cache=True, nogil=True)
def p4_emit(key, ts, price, volume, nkeys, within, cap):
    """Materialises every match as (a_row, b_row, c_row), output grown geometrically. The ring keeps
    row, ts, price and the a-flag so enumeration never touches the global columns."""
    mask = cap - 1
    rr = np.empty((nkeys, cap), np.int64)
    rt = np.empty((nkeys, cap), np.int64)
    rp = np.empty((nkeys, cap))
    ra = np.empty((nkeys, cap), np.bool_)
    head = np.zeros(nkeys, np.int64)
    size = np.zeros(nkeys, np.int64)
    out = np.empty((1 << 16, 3), np.int64)
    n = 0
    for e in range(price.shape[0]):
        k = key[e]
        t = ts[e]
        p = price[e]
        h = head[k]
        s = size[k]
        while s > 0 and t - rt[k, h] >= within:
            h = (h + 1) & mask
            s -= 1
        for qj in range(1, s):
            jj = (h + qj) & mask
            pj = rp[k, jj]
            if pj < p:
                for qi in range(qj):
                    ii = (h + qi) & mask
                    if ra[k, ii] and rp[k, ii] < pj:
                        if n == out.shape[0]:
                            new = np.empty((2 * n, 3), np.int64)
                            new[:n] = out
                            out = new
                        out[n, 0] = rr[k, ii]
                        out[n, 1] = rr[k, jj]
                        out[n, 2] = e
                        n += 1
        if s == cap:
            return out[:0], -1
        jj = (h + s) & mask
        rr[k, jj] = e
        rt[k, jj] = t
        rp[k, jj] = p
        ra[k, jj] = volume[e] > 600.0
        head[k] = h
        size[k] = s + 1
    return out[:n], n


# ---------------------------------------------------------------- P2 / P3: skipPastLastEvent with Flink's hold-back
# Per key: a ring of runs (one per start event) in start order, status 0 dead / 1 alive / 2 completed,
# and a list of the alive ones (the only runs an event has to visit).

@njit(cache=True, nogil=True, inline="always")
def _kill(k, pos, status, actpos, act, nact):
    if status[k, pos] == 1:
        i = actpos[k, pos]
        last = act[k, nact[k] - 1]
        act[k, i] = last
        actpos[k, last] = i
        nact[k] -= 1
    status[k, pos] = 0


@njit(cache=True, nogil=True)
def _front(k, t, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline):
    """advanceTime + processMatchesAccordingToSkipStrategy for one key: time out alive runs at the
    front, release completed runs that no earlier live run holds back, prune past their last event."""
    while size[k] > 0:
        pos = head[k]
        st = status[k, pos]
        if st == 0:
            head[k] = (pos + 1) % cap
            size[k] -= 1
        elif st == 2:
            end = send[k, pos]
            out[nout, 0] = srow[k, pos]
            out[nout, 1] = end
            nout += 1
            while size[k] > 0 and srow[k, head[k]] <= end:
                _kill(k, head[k], status, actpos, act, nact)
                head[k] = (head[k] + 1) % cap
                size[k] -= 1
        elif t - sts[k, pos] >= within:
            _kill(k, pos, status, actpos, act, nact)
            head[k] = (pos + 1) % cap
            size[k] -= 1
        else:
            deadline[k] = sts[k, pos] + within
            return nout
    deadline[k] = BIG_TS
    return nout


@njit(cache=True, nogil=True)
def p2_run(key, ts, price, volume, nkeys, within, cap):
    """P2: a(vol>900) followedBy b+(p>a.p, relaxed) followedBy c(p < last(b).p*0.999), within 60 s,
    skipPastLastEvent. A run completes at the first event after its first b that lies below 0.999 x
    (max b price so far) - the earliest of its branches (one per prefix of the b-sequence) to reach c.
    Returns (matches[:, (start_row, end_row)], count) or count -1 when cap is too small."""
    head = np.zeros(nkeys, np.int64)
    size = np.zeros(nkeys, np.int64)
    srow = np.empty((nkeys, cap), np.int64)
    sts = np.empty((nkeys, cap), np.int64)
    status = np.zeros((nkeys, cap), np.int8)
    send = np.empty((nkeys, cap), np.int64)
    pa = np.empty((nkeys, cap))
    mb = np.empty((nkeys, cap))
    act = np.empty((nkeys, cap), np.int64)
    actpos = np.empty((nkeys, cap), np.int64)
    nact = np.zeros(nkeys, np.int64)
    deadline = np.full(nkeys, BIG_TS)
    out = np.empty((price.shape[0] // 8 + 64, 2), np.int64)  # at most one match per a-event; grown below
    nout = 0
    for e in range(price.shape[0]):
        k = key[e]
        t = ts[e]
        p = price[e]
        if out.shape[0] - nout < cap + 2:
            new = np.empty((2 * out.shape[0], 2), np.int64)
            new[:nout] = out[:nout]
            out = new
        if t >= deadline[k]:  # the front run times out: advanceTime
            nout = _front(k, t, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
        done = False
        i = 0
        while i < nact[k]:
            pos = act[k, i]
            m = mb[k, pos]
            if m > 0.0 and p < m * 0.999:
                status[k, pos] = 2
                send[k, pos] = e
                last = act[k, nact[k] - 1]
                act[k, i] = last
                actpos[k, last] = i
                nact[k] -= 1
                done = True
                continue
            if p > pa[k, pos] and p > m:
                mb[k, pos] = p
            i += 1
        if volume[e] > 900.0:
            if size[k] == cap:
                return out[:0], -1
            pos = (head[k] + size[k]) % cap
            size[k] += 1
            srow[k, pos] = e
            sts[k, pos] = t
            status[k, pos] = 1
            if size[k] == 1:
                deadline[k] = t + within
            pa[k, pos] = p
            mb[k, pos] = -1.0
            act[k, nact[k]] = pos
            actpos[k, pos] = nact[k]
            nact[k] += 1
        if done:  # processMatchesAccordingToSkipStrategy
            nout = _front(k, t, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
    for k in range(nkeys):  # final watermark: every partial match times out, held matches are released
        if out.shape[0] - nout < cap + 2:
            new = np.empty((2 * out.shape[0] + cap, 2), np.int64)
            new[:nout] = out[:nout]
            out = new
        nout = _front(k, BIG_TS, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
    return out[:nout], nout


@njit(cache=True, nogil=True)
def p3_run(key, ts, price, volume, nkeys, within, cap):
    """P3 (the paper's Query 3): a1(vol>1000) followedBy ai+(p > (sum(ai.p)+a1.p)/(count(ai)+1), relaxed)
    followedBy b(vol < 0.8*last(ai).vol), within 1 h, skipPastLastEvent. A run completes at the first
    event after its first ai whose volume is below 0.8 x (max ai volume so far)."""
    head = np.zeros(nkeys, np.int64)
    size = np.zeros(nkeys, np.int64)
    srow = np.empty((nkeys, cap), np.int64)
    sts = np.empty((nkeys, cap), np.int64)
    status = np.zeros((nkeys, cap), np.int8)
    send = np.empty((nkeys, cap), np.int64)
    pa1 = np.empty((nkeys, cap))
    ssum = np.empty((nkeys, cap))
    scnt = np.empty((nkeys, cap))
    mv = np.empty((nkeys, cap))
    act = np.empty((nkeys, cap), np.int64)
    actpos = np.empty((nkeys, cap), np.int64)
    nact = np.zeros(nkeys, np.int64)
    deadline = np.full(nkeys, BIG_TS)
    out = np.empty((price.shape[0] // 8 + 64, 2), np.int64)
    nout = 0
    for e in range(price.shape[0]):
        k = key[e]
        t = ts[e]
        p = price[e]
        v = volume[e]
        if out.shape[0] - nout < cap + 2:
            new = np.empty((2 * out.shape[0], 2), np.int64)
            new[:nout] = out[:nout]
            out = new
        if t >= deadline[k]:  # the front run times out: advanceTime
            nout = _front(k, t, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
        done = False
        i = 0
        while i < nact[k]:
            pos = act[k, i]
            c = scnt[k, pos]
            if c > 0.0 and v < 0.8 * mv[k, pos]:
                status[k, pos] = 2
                send[k, pos] = e
                last = act[k, nact[k] - 1]
                act[k, i] = last
                actpos[k, last] = i
                nact[k] -= 1
                done = True
                continue
            if p > (ssum[k, pos] + pa1[k, pos]) / (c + 1.0):
                ssum[k, pos] += p
                scnt[k, pos] = c + 1.0
                if v > mv[k, pos]:
                    mv[k, pos] = v
            i += 1
        if v > 1000.0:
            if size[k] == cap:
                return out[:0], -1
            pos = (head[k] + size[k]) % cap
            size[k] += 1
            srow[k, pos] = e
            sts[k, pos] = t
            status[k, pos] = 1
            if size[k] == 1:
                deadline[k] = t + within
            pa1[k, pos] = p
            ssum[k, pos] = 0.0
            scnt[k, pos] = 0.0
            mv[k, pos] = -1.0
            act[k, nact[k]] = pos
            actpos[k, pos] = nact[k]
            nact[k] += 1
        if done:  # processMatchesAccordingToSkipStrategy
            nout = _front(k, t, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
    for k in range(nkeys):
        if out.shape[0] - nout < cap + 2:
            new = np.empty((2 * out.shape[0] + cap, 2), np.int64)
            new[:nout] = out[:nout]
            out = new
        nout = _front(k, BIG_TS, within, cap, head, size, srow, sts, status, send, actpos, act, nact, out, nout, deadline)
    return out[:nout], nout


# ================================================================ grouped-by-key variants
# The same patterns over input already grouped by key (stable: arrival order inside a key),
# which is what colcep's Spark path gets from sortWithinPartitions(key, time). Per-key state
# is then local and L1-hot, windows are index ranges instead of rings. `group_by_key` is the
# O(n) stable counting sort a single-node caller would pay first.

@njit(cache=True, nogil=True)
def group_by_key(key, nkeys, ts, price, volume):
    n = key.shape[0]
    offsets = np.zeros(nkeys + 1, np.int64)
    for i in range(n):
        offsets[key[i] + 1] += 1
    for k in range(nkeys):
        offsets[k + 1] += offsets[k]
    fill = offsets[:-1].copy()
    rows = np.empty(n, np.int64)
    gts = np.empty(n, np.int64)
    gp = np.empty(n)
    gv = np.empty(n)
    for i in range(n):
        k = key[i]
        j = fill[k]
        fill[k] = j + 1
        rows[j] = i
        gts[j] = ts[i]
        gp[j] = price[i]
        gv[j] = volume[i]
    return offsets, rows, gts, gp, gv


@njit(cache=True, nogil=True)
def p1_grouped(offsets, ts, price, volume, within):
    """Branch-free, so LLVM vectorises the inner loop."""
    n = 0
    for k in range(offsets.shape[0] - 1):
        for m in range(offsets[k] + 2, offsets[k + 1]):
            n += ((volume[m - 2] > 800.0) & (price[m - 1] > price[m - 2]) & (price[m] > price[m - 1])
                  & (ts[m] - ts[m - 2] < within))
    return n


@njit(cache=True, nogil=True)
def p4_grouped_count(offsets, ts, price, volume, within):
    cnt = np.zeros(price.shape[0], np.int64)
    total = 0
    for k in range(offsets.shape[0] - 1):
        lo = offsets[k]
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            while t - ts[lo] >= within:
                if volume[lo] > 600.0:
                    pi = price[lo]
                    for j in range(lo + 1, m):
                        if price[j] > pi:
                            cnt[j] -= 1
                lo += 1
            p = price[m]
            acc = 0
            below = 0
            for j in range(lo, m):
                if price[j] < p:
                    acc += cnt[j]
                    if volume[j] > 600.0:
                        below += 1
            total += acc
            cnt[m] = below
    return total


@njit(cache=True, nogil=True)
def p4_grouped_emit(offsets, rows, ts, price, volume, within):
    """Every match as (a_row, b_row, c_row) in original row numbers; output grown geometrically."""
    out = np.empty((1 << 16, 3), np.int64)
    n = 0
    for k in range(offsets.shape[0] - 1):
        lo = offsets[k]
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            while t - ts[lo] >= within:
                lo += 1
            p = price[m]
            for j in range(lo + 1, m):
                pj = price[j]
                if pj < p:
                    for i in range(lo, j):
                        if price[i] < pj and volume[i] > 600.0:
                            if n == out.shape[0]:
                                new = np.empty((2 * n, 3), np.int64)
                                new[:n] = out
                                out = new
                            out[n, 0] = rows[i]
                            out[n, 1] = rows[j]
                            out[n, 2] = rows[m]
                            n += 1
    return out[:n]


@njit(cache=True, nogil=True, inline="always")
def _release(t, within, head, tail, srow, sts, status, send, act, actpos, nact, rows, out, nout):
    """advanceTime (t = current ts) / processMatchesAccordingToSkipStrategy for one key's runs:
    time out alive runs at the front, emit completed runs no earlier alive run holds back,
    prune every run that started at or before the emitted match's last event."""
    while head < tail:
        st = status[head]
        if st == 0:
            head += 1
        elif st == 2:
            if nout == out.shape[0]:
                new = np.empty((2 * nout, 2), np.int64)
                new[:nout] = out[:nout]
                out = new
            end = send[head]
            out[nout, 0] = rows[srow[head]]
            out[nout, 1] = rows[end]
            nout += 1
            while head < tail and srow[head] <= end:
                if status[head] == 1:
                    j = actpos[head]
                    lastr = act[nact - 1]
                    act[j] = lastr
                    actpos[lastr] = j
                    nact -= 1
                status[head] = 0
                head += 1
        elif t - sts[head] >= within:
            j = actpos[head]
            lastr = act[nact - 1]
            act[j] = lastr
            actpos[lastr] = j
            nact -= 1
            status[head] = 0
            head += 1
        else:
            break
    return head, nact, out, nout


@njit(cache=True, nogil=True)
def _skip_past_last_grouped(which, offsets, rows, ts, price, volume, within):
    """P2 (which=2) / P3 (which=3) over grouped input, same run logic as p2_run / p3_run.
    Runs of one key live in plain arrays indexed by start order; `act` lists the alive ones."""
    n = price.shape[0]
    seg = 1
    for k in range(offsets.shape[0] - 1):
        seg = max(seg, offsets[k + 1] - offsets[k])
    srow = np.empty(seg, np.int64)
    sts = np.empty(seg, np.int64)
    status = np.empty(seg, np.int8)
    send = np.empty(seg, np.int64)
    f0 = np.empty(seg)  # P2: a price          P3: a1 price
    f1 = np.empty(seg)  # P2: max b price      P3: sum of ai prices
    f2 = np.empty(seg)  # P3: count of ai
    f3 = np.empty(seg)  # P3: max ai volume
    act = np.empty(seg, np.int64)
    actpos = np.empty(seg, np.int64)
    out = np.empty((n // 8 + 64, 2), np.int64)
    nout = 0
    big = np.int64(2**62)
    a_min = 900.0 if which == 2 else 1000.0
    for k in range(offsets.shape[0] - 1):
        head = 0
        tail = 0
        nact = 0
        deadline = big
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            p = price[m]
            v = volume[m]
            if t >= deadline:  # (1) advanceTime: the front run times out
                head, nact, out, nout = _release(t, within, head, tail, srow, sts, status, send, act, actpos,
                                                 nact, rows, out, nout)
                deadline = sts[head] + within if head < tail else big
            done = False  # (2) doProcess: advance the alive runs
            i = 0
            while i < nact:
                r = act[i]
                hit = False
                if which == 2:
                    mb = f1[r]
                    if mb > 0.0 and p < mb * 0.999:
                        hit = True
                    elif p > f0[r] and p > mb:
                        f1[r] = p
                else:
                    c = f2[r]
                    if c > 0.0 and v < 0.8 * f3[r]:
                        hit = True
                    elif p > (f1[r] + f0[r]) / (c + 1.0):
                        f1[r] += p
                        f2[r] = c + 1.0
                        if v > f3[r]:
                            f3[r] = v
                if hit:
                    status[r] = 2
                    send[r] = m
                    lastr = act[nact - 1]
                    act[i] = lastr
                    actpos[lastr] = i
                    nact -= 1
                    done = True
                else:
                    i += 1
            if v > a_min:  # the start state takes a new run
                r = tail
                tail += 1
                srow[r] = m
                sts[r] = t
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
            if done:  # (3) processMatchesAccordingToSkipStrategy
                head, nact, out, nout = _release(t, within, head, tail, srow, sts, status, send, act, actpos,
                                                 nact, rows, out, nout)
                deadline = sts[head] + within if head < tail else big
        # end of the key's stream: the final watermark times out every run and releases the rest
        head, nact, out, nout = _release(big, within, head, tail, srow, sts, status, send, act, actpos,
                                         nact, rows, out, nout)
    return out[:nout], nout


def p2_grouped(offsets, rows, ts, price, volume, within):
    return _skip_past_last_grouped(2, offsets, rows, ts, price, volume, within)


def p3_grouped(offsets, rows, ts, price, volume, within):
    return _skip_past_last_grouped(3, offsets, rows, ts, price, volume, within)


@njit(cache=True, nogil=True)
def p4_grouped_emit_into(offsets, rows, ts, price, volume, within, out):
    """Fills `out` (sized by p4_grouped_count) with every match (a_row, b_row, c_row).

    Like Flink's shared buffer, each event j remembers, when it arrives, the a-events it could
    follow as b (its "edges", ascending): a new c then walks only real edges, skipping those
    that have left the window, instead of re-testing every pair."""
    n = price.shape[0]
    est = np.empty(n, np.int64)  # first edge of j in pool
    elen = np.empty(n, np.int64)  # number of edges of j
    pool = np.empty(max(1024, n), np.int64)
    npool = 0
    nout = 0
    for k in range(offsets.shape[0] - 1):
        lo = offsets[k]
        for m in range(offsets[k], offsets[k + 1]):
            t = ts[m]
            while t - ts[lo] >= within:
                lo += 1
            p = price[m]
            # as c: every b below p, with each of b's a-edges still in the window
            for j in range(lo + 1, m):
                if price[j] < p:
                    q0 = est[j]
                    q1 = q0 + elen[j]
                    while q0 < q1 and pool[q0] < lo:
                        q0 += 1
                    rj = rows[j]
                    rm = rows[m]
                    for q in range(q0, q1):
                        out[nout, 0] = rows[pool[q]]
                        out[nout, 1] = rj
                        out[nout, 2] = rm
                        nout += 1
            # as b: record the a-edges of m
            if npool + (m - lo) > pool.shape[0]:
                new = np.empty(2 * pool.shape[0] + (m - lo), np.int64)
                new[:npool] = pool[:npool]
                pool = new
            est[m] = npool
            for i in range(lo, m):
                if price[i] < p and volume[i] > 600.0:
                    pool[npool] = i
                    npool += 1
            elen[m] = npool - est[m]
    return nout


def p4_grouped_emit2(offsets, rows, ts, price, volume, within):
    """Two passes: exact count, then fill an output of exactly that size."""
    total = p4_grouped_count(offsets, ts, price, volume, within)
    out = np.empty((total, 3), np.int64)
    p4_grouped_emit_into(offsets, rows, ts, price, volume, within, out)
    return out


# ---------------------------------------------------------------- P5: many live partial matches
@njit(cache=True, nogil=True)
def p5_grouped_emit(offsets, rows, ts, price, volume, within, vol_min, mult):
    """P5 (threshold breakout): a = volume > vol_min, then followedBy b = price > mult * a.price,
    within ``within``; no skip. Every open `a` is a partial match waiting for its threshold, so
    many stay live. Per key a binary min-heap of thresholds: an event costs O(1) when it fires
    nothing and O(log R) per match, instead of O(R) for R live partial matches.
    Returns (a_row, b_row) pairs; expired partial matches are dropped when they reach the top."""
    n = rows.shape[0]
    out = np.empty((max(16, n // 8), 2), np.int64)
    nout = 0
    hthr = np.empty(16, np.float64)
    hts = np.empty(16, np.int64)
    hrow = np.empty(16, np.int64)
    for k in range(offsets.shape[0] - 1):
        h = 0
        for m in range(offsets[k], offsets[k + 1]):
            p = price[m]
            t = ts[m]
            while h > 0 and hthr[0] < p:
                if t - hts[0] < within:
                    if nout == out.shape[0]:
                        bigger = np.empty((out.shape[0] * 2, 2), np.int64)
                        bigger[:nout] = out[:nout]
                        out = bigger
                    out[nout, 0] = hrow[0]
                    out[nout, 1] = rows[m]
                    nout += 1
                h -= 1                       # pop: move the last leaf to the root, sift down
                hthr[0] = hthr[h]; hts[0] = hts[h]; hrow[0] = hrow[h]
                i = 0
                while True:
                    c = 2 * i + 1
                    if c >= h:
                        break
                    if c + 1 < h and hthr[c + 1] < hthr[c]:
                        c += 1
                    if hthr[c] >= hthr[i]:
                        break
                    hthr[i], hthr[c] = hthr[c], hthr[i]
                    hts[i], hts[c] = hts[c], hts[i]
                    hrow[i], hrow[c] = hrow[c], hrow[i]
                    i = c
            if volume[m] > vol_min:
                if h == hthr.shape[0]:
                    hthr = np.concatenate((hthr, np.empty(h, np.float64)))
                    hts = np.concatenate((hts, np.empty(h, np.int64)))
                    hrow = np.concatenate((hrow, np.empty(h, np.int64)))
                i = h                        # push: append, sift up
                h += 1
                hthr[i] = mult * p; hts[i] = t; hrow[i] = rows[m]
                while i > 0:
                    par = (i - 1) // 2
                    if hthr[par] <= hthr[i]:
                        break
                    hthr[i], hthr[par] = hthr[par], hthr[i]
                    hts[i], hts[par] = hts[par], hts[i]
                    hrow[i], hrow[par] = hrow[par], hrow[i]
                    i = par
    return out[:nout]
