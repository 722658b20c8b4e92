"""Condition bytecode: a tiny stack machine over float64, evaluated per (run, event).

The runs' V vectors live in one flat array (``VW`` floats per group, the run's vector at an
offset), so evaluating a condition never creates an array view: the hot loop does no
reference counting.

Conditions that read only the current event are evaluated column-at-a-time into masks
before the kernel runs; what is left here reads the run's aggregate vector V (the SASE+
paper's computation-state vector). A program is a slice of ``code`` (int32) with constants
in ``consts``. Booleans are 1.0 / 0.0; null is NaN; a comparison with NaN is false.

V layout: group ``g`` (one stage, one column) owns ``VW`` floats at ``g * VW``:
``n_events, n_valid, sum, min, max, first, last, first_pos, last_pos`` (nulls skipped).
"""
import numpy as np
from numba import njit

# opcodes
OP_COL, OP_CONST, OP_MASK, OP_AGG, OP_ARITH, OP_CMP, OP_AND, OP_OR, OP_NOT, OP_ISNULL, OP_ISIN, OP_TRUE = range(12)
# aggregate functions
AGG_FIRST, AGG_LAST, AGG_SUM, AGG_COUNT, AGG_AVG, AGG_MIN, AGG_MAX = range(7)
# arithmetic / comparison operators
A_ADD, A_SUB, A_MUL, A_DIV, A_QUOT = range(5)
C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE = range(6)
# V group layout
V_N, V_VALID, V_SUM, V_MIN, V_MAX, V_FIRST, V_LAST, V_FIRST_POS, V_LAST_POS = range(9)
VW = 9

STACK = 64


@njit(cache=True, nogil=True, inline="always")
def v_update(v, base, x, pos):
    """Account one event (value ``x``, position ``pos``) in the V group starting at ``base``."""
    v[base + V_N] += 1.0
    if x == x:  # not null
        if v[base + V_VALID] == 0.0:
            v[base + V_MIN] = x
            v[base + V_MAX] = x
            v[base + V_FIRST] = x
            v[base + V_FIRST_POS] = pos
        else:
            if x < v[base + V_MIN]:
                v[base + V_MIN] = x
            if x > v[base + V_MAX]:
                v[base + V_MAX] = x
        v[base + V_VALID] += 1.0
        v[base + V_SUM] += x
        v[base + V_LAST] = x
        v[base + V_LAST_POS] = pos


@njit(cache=True, nogil=True, inline="always")
def v_take(v, base, vg_stage, vg_col, stg, cols, row, pos):
    """Account event ``row`` (stream position ``pos``) of stage ``stg`` in the V at ``v[base]``:
    in each of its groups of that stage."""
    for vg in range(vg_stage.shape[0]):
        if vg_stage[vg] == stg:
            c = vg_col[vg]
            v_update(v, base + vg * VW, cols[c, row] if c >= 0 else 0.0, pos)


@njit(cache=True, nogil=True, _nrt=False)
def v_init(v):
    """An empty V: counts and sums 0, the rest null."""
    for g in range(v.shape[0] // VW):
        b = g * VW
        v[b + V_N] = 0.0
        v[b + V_VALID] = 0.0
        v[b + V_SUM] = 0.0
        v[b + V_MIN] = np.nan
        v[b + V_MAX] = np.nan
        v[b + V_FIRST] = np.nan
        v[b + V_LAST] = np.nan
        v[b + V_FIRST_POS] = np.nan
        v[b + V_LAST_POS] = np.nan


@njit(cache=True, nogil=True, inline="always")
def _agg_one(func, v, b):
    """Aggregate ``func`` over the one V group starting at ``b`` (the common case)."""
    if func == AGG_COUNT:
        return v[b + V_N]
    if func == AGG_SUM:
        return v[b + V_SUM]
    if v[b + V_VALID] == 0.0:
        return np.nan
    if func == AGG_LAST:
        return v[b + V_LAST]
    if func == AGG_FIRST:
        return v[b + V_FIRST]
    if func == AGG_AVG:
        return v[b + V_SUM] / v[b + V_VALID]
    if func == AGG_MIN:
        return v[b + V_MIN]
    return v[b + V_MAX]


@njit(cache=True, nogil=True, _nrt=False)
def _agg(func, code, pc, ng, v, voff):
    """Aggregate ``func`` over the V groups listed at ``code[pc:pc+ng]`` of the V at ``voff``."""
    if ng == 1:
        return _agg_one(func, v, voff + code[pc] * VW)
    n = 0.0
    valid = 0.0
    s = 0.0
    lo = np.nan
    hi = np.nan
    fv = np.nan
    fpos = np.inf
    lv = np.nan
    lpos = -np.inf
    for j in range(ng):
        b = voff + code[pc + j] * VW
        n += v[b + V_N]
        if v[b + V_VALID] > 0.0:
            valid += v[b + V_VALID]
            s += v[b + V_SUM]
            if not (lo <= v[b + V_MIN]):
                lo = v[b + V_MIN]
            if not (hi >= v[b + V_MAX]):
                hi = v[b + V_MAX]
            if v[b + V_FIRST_POS] < fpos:
                fpos = v[b + V_FIRST_POS]
                fv = v[b + V_FIRST]
            if v[b + V_LAST_POS] > lpos:
                lpos = v[b + V_LAST_POS]
                lv = v[b + V_LAST]
    if func == AGG_COUNT:
        return n
    if func == AGG_SUM:
        return s
    if valid == 0.0:
        return np.nan
    if func == AGG_AVG:
        return s / valid
    if func == AGG_MIN:
        return lo
    if func == AGG_MAX:
        return hi
    if func == AGG_FIRST:
        return fv
    return lv


@njit(cache=True, nogil=True, inline="always")
def compare(k, a, b):
    """``a <k> b`` with null (NaN) on either side false."""
    if a != a or b != b:
        return False
    if k == C_EQ:
        return a == b
    if k == C_NE:
        return a != b
    if k == C_LT:
        return a < b
    if k == C_LE:
        return a <= b
    if k == C_GT:
        return a > b
    return a >= b


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def eval_program(code, start, end, consts, row, masks, cols, v, voff, stack):
    """Run the program ``code[start:end]`` for event ``row`` and the run whose V starts at
    ``v[voff]`` (``stack``: scratch space of ``STACK`` floats); returns True when the
    condition holds."""
    return eval_value(code, start, end, consts, row, masks, cols, v, voff, stack) != 0.0


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
def eval_value(code, start, end, consts, row, masks, cols, v, voff, stack):
    """The value the program ``code[start:end]`` leaves on the stack (booleans as 1.0 / 0.0).
    A program that reads no event (``row`` may then be -1) gives a run's threshold."""
    sp = 0
    pc = start
    while pc < end:
        op = code[pc]
        if op == OP_COL:
            stack[sp] = cols[code[pc + 1], row]
            sp += 1
            pc += 2
        elif op == OP_CONST:
            stack[sp] = consts[code[pc + 1]]
            sp += 1
            pc += 2
        elif op == OP_MASK:
            stack[sp] = 1.0 if masks[code[pc + 1], row] else 0.0
            sp += 1
            pc += 2
        elif op == OP_AGG:
            ng = code[pc + 2]
            stack[sp] = _agg(code[pc + 1], code, pc + 3, ng, v, voff)
            sp += 1
            pc += 3 + ng
        elif op == OP_ARITH:
            b = stack[sp - 1]
            a = stack[sp - 2]
            k = code[pc + 1]
            if k == A_ADD:
                r = a + b
            elif k == A_SUB:
                r = a - b
            elif k == A_MUL:
                r = a * b
            elif k == A_DIV:
                r = a / b
            else:                   # A_QUOT: truncated toward zero
                r = np.trunc(a / b)
            stack[sp - 2] = r
            sp -= 1
            pc += 2
        elif op == OP_CMP:
            b = stack[sp - 1]
            a = stack[sp - 2]
            stack[sp - 2] = 1.0 if compare(code[pc + 1], a, b) else 0.0
            sp -= 1
            pc += 2
        elif op == OP_AND:
            stack[sp - 2] = 1.0 if (stack[sp - 2] != 0.0 and stack[sp - 1] != 0.0) else 0.0
            sp -= 1
            pc += 1
        elif op == OP_OR:
            stack[sp - 2] = 1.0 if (stack[sp - 2] != 0.0 or stack[sp - 1] != 0.0) else 0.0
            sp -= 1
            pc += 1
        elif op == OP_NOT:
            stack[sp - 1] = 0.0 if stack[sp - 1] != 0.0 else 1.0
            pc += 1
        elif op == OP_ISNULL:
            x = stack[sp - 1]
            stack[sp - 1] = 1.0 if x != x else 0.0
            pc += 1
        elif op == OP_ISIN:
            n = code[pc + 1]
            x = stack[sp - 1]
            r = 0.0
            for j in range(n):
                if x == consts[code[pc + 2 + j]]:
                    r = 1.0
            stack[sp - 1] = r
            pc += 2 + n
        else:  # OP_TRUE
            stack[sp] = 1.0
            sp += 1
            pc += 1
    return stack[sp - 1]


@njit(cache=True, nogil=True, _nrt=False)
def v_take_call(v, base, vg_stage, vg_col, stg, cols, row, pos):
    """``v_take`` as a function of its own, compiled once (the generated steps call it at many
    places: inlined, it would be typed again at each)."""
    v_take(v, base, vg_stage, vg_col, stg, cols, row, pos)


@njit(cache=True, nogil=True, _nrt=False)
def compare_call(k, a, b):
    """``compare`` as a function of its own, compiled once (as ``v_take_call``)."""
    return compare(k, a, b)
