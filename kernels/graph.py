"""Tables derived once from a program's state graph (``colcep.engine.program`` stores them): the
condition each state waits on, and the bounds of one event's decision-graph DFS."""
import numpy as np
from numba import njit

from .codes import COND_NOT, IGNORE, NORMAL, PENDING, PROCEED, TAKE


@njit(cache=True, nogil=True)
def sleep_conditions(st_kind, tr_ptr, tr_act, tr_tgt, tr_cond, cond_kind, cond_a):
    """Per state, the condition a run there waits for (-1: none, the run is stepped at every
    event). A state waits when its edges are one TAKE with condition ``c`` and one IGNORE back
    to itself under ``not c`` or ``true``, and no PROCEED: at an event where ``c`` is false
    its run continues unchanged (same state, buffer node and V), so the kernel skips the run
    until the next event where ``c`` holds (SASE+'s skip till next / any match)."""
    out = np.full(st_kind.shape[0], -1, np.int64)
    for s in range(st_kind.shape[0]):
        if st_kind[s] != NORMAL and st_kind[s] != PENDING:
            continue
        take = -1
        n_take = 0
        n_ignore = 0
        ignore_ok = False
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == TAKE:
                n_take += 1
                take = tr_cond[tr]
            elif tr_act[tr] == IGNORE:
                n_ignore += 1
                ignore_ok = tr_tgt[tr] == s
            else:
                n_take = 2  # a PROCEED edge: never waits
        if n_take != 1 or n_ignore != 1 or not ignore_ok or take < 0:
            continue
        for tr in range(tr_ptr[s], tr_ptr[s + 1]):
            if tr_act[tr] == IGNORE:
                c = tr_cond[tr]
                if c < 0 or (cond_kind[c] == COND_NOT and cond_a[c] == take):
                    out[s] = take
    return out


@njit(cache=True, nogil=True)
def dfs_bounds(tr_ptr, tr_act, tr_tgt, n_states):
    """Upper bounds, over all start states, of the pushes and of the TAKE / IGNORE edges of
    one decision-graph DFS (every condition taken as true; PROCEED edges form a DAG)."""
    pushes = np.ones(n_states, np.int64)
    edges = np.zeros(n_states, np.int64)
    for _ in range(n_states + 1):  # longest PROCEED chain < n_states: a fixpoint by then
        for s in range(n_states):
            p = 1
            e = 0
            for tr in range(tr_ptr[s], tr_ptr[s + 1]):
                if tr_act[tr] == PROCEED:
                    p += pushes[tr_tgt[tr]]
                    e += edges[tr_tgt[tr]]
                else:
                    e += 1
            pushes[s] = min(p, 1 << 20)
            edges[s] = min(e, 1 << 20)
    return max(16, pushes.max() + 1), max(1, edges.max())
