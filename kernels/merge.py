"""Merging equivalent runs (SASE+ 4.2.2): a run made at this event that continues exactly as
another run does becomes that run, a JOIN node of the shared buffer keeping both paths."""
import numpy as np
from numba import njit

from .buffer import join
from .runs import move_run
from .vm import VW


@njit(cache=True, nogil=True, _nrt=False)
def merge_runs(bo, nb, new, W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, vw, st_rel, st_merge,
                n_row, n_stage, n_parent, n_ref, meta, cross, aux, ht_run, ht_gen, gen):
    """SASE+'s merging of equivalent runs: a run made at this event (``new``) in the same
    state as a run kept before it or an older run after it, with the same relevant part of V
    (``st_rel``), continues identically, so it becomes that run: a JOIN node keeps both paths.
    Without ``cross`` only runs of the same start merge (a window acts on each start); with it
    (no window) runs of any start do, so the live runs of a Kleene closure stay a few per state
    instead of a few per start. Targets come from one pass over a hash table on (state,
    relevant V, and the start without ``cross``) (``ht_*``, stamped ``gen``; ``_merge_targets``);
    ``aux``: scratch, one slot per run. Returns the number of runs left (kept in order at ``bo``)."""
    _merge_targets(bo, nb, new, W_state, W_spos, W_vs, W_v, vw, st_rel, st_merge, cross, aux, ht_run, ht_gen, gen)
    w = 0
    for q in range(nb):
        x = bo + q
        y = -1
        t = aux[q]
        if t >= 0:  # its target: kept before it (already moved) or an older run after it
            y = bo + (-2 - aux[t] if t < q else t)
        if y >= 0:
            W_node[y] = join(n_row, n_stage, n_parent, n_ref, meta, W_node[y], W_node[x])
            if W_wake[x] < W_wake[y]:
                W_wake[y] = W_wake[x]
        else:
            if w != q:
                move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, x, bo + w)
            aux[q] = -2 - w  # where the kept run now is
            w += 1
    return w


@njit(cache=True, nogil=True, _nrt=False)
def _merge_targets(bo, nb, new, W_state, W_spos, W_vs, W_v, vw, st_rel, st_merge, cross, aux, ht_run, ht_gen, gen):
    """For every run ``q``, the run it merges into (``aux[q]``, an index into the list) or -1:
    a new run merges into an older run anywhere in the list or a new run kept before it, of
    the same start unless ``cross``. One pass over a hash table: linear in the runs."""
    mask = ht_run.shape[0] - 1
    for phase in range(2):  # 0: the older runs enter the table; 1: the new runs look up
        for q in range(nb):
            x = bo + q
            s = W_state[x]
            if phase == 0:
                aux[q] = -1
            if not st_merge[s] or (phase == 0) == (new[q] != 0):
                continue
            h = _run_hash(s, W_v, W_vs[x] * vw, st_rel)
            if not cross:
                h = (h ^ W_spos[x]) * np.int64(0x9E3779B97F4A7C15)
            i = (h ^ (h >> np.int64(31))) & mask
            while ht_gen[i] == gen:
                y = ht_run[i]
                if (W_state[bo + y] == s and (cross or W_spos[bo + y] == W_spos[x])
                        and _same_relevant(W_v, W_vs[bo + y] * vw, W_vs[x] * vw, st_rel, s)):
                    break
                i = (i + 1) & mask
            if ht_gen[i] == gen:
                if phase == 1:
                    aux[q] = ht_run[i]
            else:
                ht_gen[i] = gen
                ht_run[i] = q


@njit(cache=True, nogil=True, inline="always")
def _run_hash(s, v, a, st_rel):
    """A hash of a run's state and relevant V (equal runs hash alike; NaN as one value)."""
    h = np.int64(s) * np.int64(0x9E3779B1) + np.int64(0x632BE5AB)
    for g in range(st_rel.shape[1]):
        if st_rel[s, g]:
            for f in range(VW):
                x = v[a + g * VW + f]
                if x != x:
                    k = np.int64(0x7FF8)
                elif abs(x) < 4e18:
                    k = np.int64(x) * np.int64(0x2545F491) + np.int64((x - np.floor(x)) * 1073741824.0)
                else:
                    k = np.int64(1) if x > 0 else np.int64(-1)
                h = (h ^ k) * np.int64(0x100000001B3)
    return h ^ (h >> np.int64(29))


@njit(cache=True, nogil=True, _nrt=False)
def _same_relevant(v, a, b, st_rel, s):
    """The V groups state ``s`` reads are equal (bit for bit: nulls equal) at ``a`` and ``b``."""
    for g in range(st_rel.shape[1]):
        if st_rel[s, g]:
            for f in range(VW):
                x = v[a + g * VW + f]
                y = v[b + g * VW + f]
                if x != y and not (x != x and y != y):
                    return False
    return True
