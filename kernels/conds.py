"""Conditions at run time: one condition for one event and run (``cond``), and the scan
for the next event at which a waiting run's condition holds (``next_event``)."""
from numba import njit

from .codes import BIG, COND_MASK, COND_NOT
from .vm import compare, eval_program, eval_value

SCAN_AHEAD = 64  # events a waiting run's condition is scanned ahead at a time


@njit(cache=True, nogil=True, inline="always")
def strip_not(c, cond_kind, cond_a):
    """Condition ``c`` without its negations: ``(inner condition, negated)``."""
    neg = False
    while cond_kind[c] == COND_NOT:
        neg = not neg
        c = cond_a[c]
    return c, neg


@njit(cache=True, nogil=True, _nrt=False)
def cond(c, cond_kind, cond_a, cond_b, code, consts, row, masks, cols, v, voff, vm_stack, c_val, c_stamp, stamp):
    """Condition ``c`` (-1: true) for event ``row`` and the run whose V is at ``v[voff]``;
    program results are cached under ``stamp`` (one stamp per run and event)."""
    if c < 0:
        return True
    c, neg = strip_not(c, cond_kind, cond_a)
    if cond_kind[c] == COND_MASK:
        r = masks[cond_a[c], row] != 0
    elif c_stamp[c] == stamp:
        r = c_val[c] != 0
    else:
        r = eval_program(code, cond_a[c], cond_b[c], consts, row, masks, cols, v, voff, vm_stack)
        c_val[c] = 1 if r else 0
        c_stamp[c] = stamp
    return r != neg


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def next_event(c, cond_kind, cond_a, cond_b, cond_thr, code, consts, masks, cols, v, voff, vm_stack,
                order, row_lo, j, n_rows, ts, last_t):
    """The first of the key's events ``j..n_rows-1`` at which condition ``c`` holds for the
    run whose V is at ``v[voff]``; ``BIG`` when there is none before time ``last_t`` (the
    run's window); the event to look again from after ``SCAN_AHEAD`` events or at
    ``n_rows`` (a run that something else ends early does not pay for its whole window)."""
    if n_rows > j + SCAN_AHEAD:
        n_rows = j + SCAN_AHEAD
    c, neg = strip_not(c, cond_kind, cond_a)
    if cond_kind[c] == COND_MASK:
        m = cond_a[c]
        while j < n_rows:
            row = order[row_lo + j]
            if ts[row] > last_t:
                return BIG
            if (masks[m, row] != 0) != neg:
                return j
            j += 1
        return n_rows
    x = cond_thr[c, 0]
    if x >= 0:  # column <op> threshold
        op = cond_thr[c, 1]
        thr = eval_value(code, cond_thr[c, 2], cond_thr[c, 3], consts, -1, masks, cols, v, voff, vm_stack)
        if thr != thr and not neg:
            return BIG
        while j < n_rows:
            row = order[row_lo + j]
            if ts[row] > last_t:
                return BIG
            if compare(op, cols[x, row], thr) != neg:
                return j
            j += 1
        return n_rows
    while j < n_rows:
        row = order[row_lo + j]
        if ts[row] > last_t:
            return BIG
        if eval_program(code, cond_a[c], cond_b[c], consts, row, masks, cols, v, voff, vm_stack) != neg:
            return j
        j += 1
    return n_rows
