"""SQL:2016 row pattern matching (MATCH_RECOGNIZE, standard mode): a priority-ordered thread
machine (a Pike VM) over the pattern compiled as Trino compiles it.

From each start row the matcher finds the *preferred* match, the one a depth-first search in
preferment order would find first, without backtracking: the live threads are kept in
preferment order and stepped together, one row at a time. A thread that reaches ``MATCH``
records its match and cuts every thread after it; the threads before it run on and may
replace it. Two threads at the same instruction whose registers are equal (everything the
DEFINE conditions can still read: the rows and labels they navigate to, the aggregates) are
equivalent, and the later one is dropped, so the thread list stays as small as the distinct
histories the conditions can tell apart: ``(A+)+ B`` is linear, not exponential.

Plain arrays in, plain arrays out:

- the program: ``op``, ``arg`` (CONSUME: the variable), ``x``, ``y`` (SPLIT / JMP targets);
- conditions: per variable a slice ``code[c_lo[v]:c_hi[v]]`` of stack code over float64 with
  constants ``consts`` (null is NaN; booleans 1.0 / 0.0 / NaN, SQL's three-valued logic);
- registers: ``W`` floats per thread, laid out by the compiler: per variable set ``s`` (a
  variable, a SUBSET union, or the universal set) the last ``last_n[s]`` rows (``last_off``),
  the first ``first_n[s]`` rows (``first_off``), its row count (``cnt_off``) and the label of its
  last row (``lab_off``, -1 when not read); per aggregate group ``g`` (a set and a column) the
  count, count of non-null values, sum, min and max at ``agg_off[g]``;
- the input: ``cols[c, row]`` (float64, strings as codes of one sorted dictionary) over rows
  sorted by partition (``bounds``: partition ``p`` is rows ``bounds[p]:bounds[p + 1]``).

Output: per match its partition, first row, end (exclusive), number and the offset of its
labels (``lab_pc``: the CONSUME instruction of each row, which gives its variable and whether
it is excluded), and an error code (see ``ERR_*``) with the row it refers to.
"""
import numpy as np
from numba import njit

from .arrays import grow
from .vm import compare  # and its comparison codes (C_EQ ...), which OP_CMP takes

# program
CONSUME, SPLIT, JMP, ASSERT_START, ASSERT_END, MATCH = range(6)
# skip modes
SKIP_PAST, SKIP_NEXT, SKIP_FIRST, SKIP_LAST = range(4)
# errors
ERR_NONE, ERR_SKIP_ABSENT, ERR_SKIP_FIRST_ROW, ERR_DIV_ZERO, ERR_THREADS, ERR_STOPPED = range(6)
# condition code
(OP_CONST, OP_ROW_CUR, OP_ROW_LAST, OP_ROW_FIRST, OP_ROW_ULAST, OP_ROW_UFIRST, OP_SHIFT, OP_COLAT, OP_LABELAT,
 OP_LABREG, OP_LABCUR, OP_AGG, OP_CNT, OP_MATCHNO, OP_ARITH, OP_NEG, OP_ABS, OP_CMP, OP_AND, OP_OR, OP_NOT,
 OP_ISNULL, OP_IN, OP_JMP, OP_JNT, OP_JNN, OP_POP, OP_ROW_WALK, OP_AGGW, OP_FLOOR, OP_CEIL, OP_ROUND) = range(32)
A_ADD, A_SUB, A_MUL, A_DIV, A_IDIV, A_MOD, A_IMOD = range(7)
AGG_COUNT, AGG_SUM, AGG_AVG, AGG_MIN, AGG_MAX, AGG_ANY, AGG_MAX_BY, AGG_MIN_BY = range(8)
G_N, G_VALID, G_SUM, G_MIN, G_MAX = range(5)
GW = 5  # floats per aggregate group


@njit(cache=True, nogil=True)
def init_regs(reg, last_n, last_off, first_n, first_off, cnt_off, lab_off, agg_off):
    """Registers of a thread that has consumed no row."""
    for s in range(last_n.shape[0]):
        for k in range(last_n[s]):
            reg[last_off[s] + k] = -1.0
        for k in range(first_n[s]):
            reg[first_off[s] + k] = -1.0
        if cnt_off[s] >= 0:
            reg[cnt_off[s]] = 0.0
        if lab_off[s] >= 0:
            reg[lab_off[s]] = -1.0
    for g in range(agg_off.shape[0]):
        b = agg_off[g]
        reg[b + G_N] = 0.0
        reg[b + G_VALID] = 0.0
        reg[b + G_SUM] = 0.0
        reg[b + G_MIN] = np.nan
        reg[b + G_MAX] = np.nan


@njit(cache=True, nogil=True)
def take_row(reg, v, row, in_set, last_n, last_off, first_n, first_off, cnt_off, lab_off, agg_set, agg_col,
             agg_off, cols):
    """Account row ``row`` labelled ``v`` in the registers ``reg``."""
    for s in range(in_set.shape[1]):
        if not in_set[v, s]:
            continue
        lo = last_off[s]
        for k in range(last_n[s] - 1, 0, -1):
            reg[lo + k] = reg[lo + k - 1]
        if last_n[s] > 0:
            reg[lo] = row
        if cnt_off[s] >= 0:
            c = int(reg[cnt_off[s]])
            if c < first_n[s]:
                reg[first_off[s] + c] = row
            reg[cnt_off[s]] = c + 1
        if lab_off[s] >= 0:
            reg[lab_off[s]] = v
    for g in range(agg_off.shape[0]):
        if not in_set[v, agg_set[g]]:
            continue
        b = agg_off[g]
        x = cols[agg_col[g], row]
        reg[b + G_N] += 1.0
        if x == x:
            if reg[b + G_VALID] == 0.0:
                reg[b + G_MIN] = x
                reg[b + G_MAX] = x
            else:
                if x < reg[b + G_MIN]:
                    reg[b + G_MIN] = x
                if x > reg[b + G_MAX]:
                    reg[b + G_MAX] = x
            reg[b + G_VALID] += 1.0
            reg[b + G_SUM] += x


@njit(cache=True, nogil=True)
def _truth3(x):
    """SQL truth of a stack value: 1 true, 0 false, -1 unknown (null)."""
    if x != x:
        return -1
    return 1 if x != 0.0 else 0


@njit(cache=True, nogil=True)
def _core(code, lo, hi, consts, reg, row, start, pstart, pend, v, node, nd_pc, nd_parent, prog_arg, var_code,
          last_off, first_off, cnt_off, lab_off, agg_off, number, cols, stack, base, walk, aggv, err):
    """The value of ``code[lo:hi]`` for the thread with registers ``reg`` standing on ``row``
    (labelled ``v``; ``node``: its labels so far, newest first) in a match that began at
    ``start``, in the partition of rows ``pstart:pend``; ``stack[base:]`` is free, ``walk`` the row an
    aggregate's argument is evaluated at, ``aggv`` the walked aggregates' values. ``err[0]`` is
    set on a division by zero."""
    sp = base
    pc = lo
    while pc < hi:
        op = code[pc]
        if op == OP_CONST:
            stack[sp] = consts[code[pc + 1]]
            sp += 1
            pc += 2
        elif op == OP_ROW_CUR:
            stack[sp] = row
            sp += 1
            pc += 1
        elif op == OP_ROW_LAST:
            stack[sp] = reg[last_off[code[pc + 1]] + code[pc + 2]]
            sp += 1
            pc += 3
        elif op == OP_ROW_FIRST:
            stack[sp] = reg[first_off[code[pc + 1]] + code[pc + 2]]
            sp += 1
            pc += 3
        elif op == OP_ROW_ULAST:
            r = row - code[pc + 1]
            stack[sp] = r if r >= start else -1.0
            sp += 1
            pc += 2
        elif op == OP_ROW_UFIRST:
            r = start + code[pc + 1]
            stack[sp] = r if r <= row else -1.0
            sp += 1
            pc += 2
        elif op == OP_SHIFT:
            r = stack[sp - 1]
            if r >= 0.0:
                r += code[pc + 1]
                if r < pstart or r >= pend:
                    r = -1.0
            stack[sp - 1] = r
            pc += 2
        elif op == OP_COLAT:
            r = stack[sp - 1]
            stack[sp - 1] = cols[code[pc + 1], int(r)] if r >= 0.0 else np.nan
            pc += 2
        elif op == OP_LABELAT:
            r = stack[sp - 1]
            lab = -1
            if r >= start and r <= row:
                lab = v
                nd = node
                for _ in range(int(row - r)):
                    lab = prog_arg[nd_pc[nd]]
                    nd = nd_parent[nd]
            stack[sp - 1] = var_code[lab] if lab >= 0 else np.nan
            pc += 1
        elif op == OP_LABREG:
            lab = int(reg[lab_off[code[pc + 1]]])
            stack[sp] = var_code[lab] if lab >= 0 else np.nan
            sp += 1
            pc += 2
        elif op == OP_LABCUR:
            stack[sp] = var_code[v]
            sp += 1
            pc += 1
        elif op == OP_AGG:
            b = agg_off[code[pc + 2]]
            f = code[pc + 1]
            if f == AGG_COUNT:
                x = reg[b + G_VALID]
            elif reg[b + G_VALID] == 0.0:
                x = np.nan
            elif f == AGG_SUM:
                x = reg[b + G_SUM]
            elif f == AGG_AVG:
                x = reg[b + G_SUM] / reg[b + G_VALID]
            elif f == AGG_MIN:
                x = reg[b + G_MIN]
            else:
                x = reg[b + G_MAX]
            stack[sp] = x
            sp += 1
            pc += 3
        elif op == OP_CNT:
            stack[sp] = reg[cnt_off[code[pc + 1]]]
            sp += 1
            pc += 2
        elif op == OP_MATCHNO:
            stack[sp] = number
            sp += 1
            pc += 1
        elif op == OP_ARITH:
            b2 = stack[sp - 1]
            a2 = stack[sp - 2]
            k = code[pc + 1]
            if k == A_ADD:
                x = a2 + b2
            elif k == A_SUB:
                x = a2 - b2
            elif k == A_MUL:
                x = a2 * b2
            elif a2 != a2 or b2 != b2:
                x = np.nan
            elif k == A_DIV:
                x = a2 / b2 if b2 != 0.0 else (np.nan if a2 == 0.0 else np.sign(a2) * np.inf)
            elif k == A_MOD:  # of doubles: the sign of the dividend, NaN by zero
                x = np.fmod(a2, b2) if b2 != 0.0 else np.nan
            elif b2 == 0.0:  # integer division or modulo by zero: the query fails, as in Trino
                err[0] = ERR_DIV_ZERO
                x = np.nan
            elif k == A_IDIV:
                x = np.trunc(a2 / b2)
            else:  # A_IMOD: the sign of the dividend
                x = np.fmod(a2, b2)
            stack[sp - 2] = x
            sp -= 1
            pc += 2
        elif op == OP_NEG:
            stack[sp - 1] = -stack[sp - 1]
            pc += 1
        elif op == OP_ABS:
            stack[sp - 1] = abs(stack[sp - 1])
            pc += 1
        elif op == OP_CMP:
            b2 = stack[sp - 1]
            a2 = stack[sp - 2]
            if a2 != a2 or b2 != b2:  # NULL on either side: unknown (three-valued, unlike vm.compare alone)
                stack[sp - 2] = np.nan
            else:
                stack[sp - 2] = 1.0 if compare(code[pc + 1], a2, b2) else 0.0
            sp -= 1
            pc += 2
        elif op == OP_AND or op == OP_OR:
            ta = _truth3(stack[sp - 2])
            tb = _truth3(stack[sp - 1])
            if op == OP_AND:
                x = 0.0 if (ta == 0 or tb == 0) else (np.nan if (ta < 0 or tb < 0) else 1.0)
            else:
                x = 1.0 if (ta == 1 or tb == 1) else (np.nan if (ta < 0 or tb < 0) else 0.0)
            stack[sp - 2] = x
            sp -= 1
            pc += 1
        elif op == OP_NOT:
            t = _truth3(stack[sp - 1])
            stack[sp - 1] = np.nan if t < 0 else (0.0 if t == 1 else 1.0)
            pc += 1
        elif op == OP_ISNULL:
            stack[sp - 1] = 1.0 if stack[sp - 1] != stack[sp - 1] else 0.0
            pc += 1
        elif op == OP_IN:
            n = code[pc + 1]
            x = stack[sp - 1]
            if x == x:
                r = 0.0
                for j in range(n):
                    if x == consts[code[pc + 2 + j]]:
                        r = 1.0
                stack[sp - 1] = r
            pc += 2 + n
        elif op == OP_JMP:
            pc = code[pc + 1]
        elif op == OP_JNT:  # pop; jump unless true
            sp -= 1
            pc = pc + 2 if _truth3(stack[sp]) == 1 else code[pc + 1]
        elif op == OP_JNN:  # jump if the top is not null (keeping it)
            pc = code[pc + 1] if stack[sp - 1] == stack[sp - 1] else pc + 2
        elif op == OP_POP:
            sp -= 1
            pc += 1
        elif op == OP_ROW_WALK:
            stack[sp] = walk
            sp += 1
            pc += 1
        elif op == OP_FLOOR:
            stack[sp - 1] = np.floor(stack[sp - 1])
            pc += 1
        elif op == OP_CEIL:
            stack[sp - 1] = np.ceil(stack[sp - 1])
            pc += 1
        elif op == OP_ROUND:
            # half away from zero to n digits, consts[code[pc + 1]] = 10.0 ** n (n < 0: tens...); np.divide,
            # unlike /, adds no ZeroDivisionError path to the loop (which made every condition 2.5x slower)
            x = stack[sp - 1]
            scale = consts[code[pc + 1]]
            stack[sp - 1] = np.divide(np.sign(x) * np.floor(abs(x) * scale + 0.5), scale)
            pc += 2
        else:  # OP_AGGW: a walked aggregate, computed before the program ran
            stack[sp] = aggv[code[pc + 1]]
            sp += 1
            pc = code[pc + 2]
    return stack[sp - 1]


@njit(cache=True, nogil=True)
def evaluate(code, lo, hi, walks, w_lo, w_hi, consts, reg, row, start, pstart, pend, v, node, nd_pc, nd_parent,
             prog_arg, var_code, in_set, last_off, first_off, cnt_off, lab_off, agg_off, number, cols, stack, aggv,
             err):
    """``_core`` of a condition, after its walked aggregates ``walks[w_lo:w_hi]`` (function, set,
    argument code ``a_lo:a_hi``, key code ``a_hi:b_hi``) are computed over the thread's rows of
    their set, newest first (an aggregate's argument cannot hold another aggregate: no recursion)."""
    for w in range(w_lo, w_hi):
        f = walks[w, 0]
        s = walks[w, 1]
        a_lo = walks[w, 2]
        a_hi = walks[w, 3]
        b_hi = walks[w, 4]
        n = 0
        acc = 0.0
        best = np.nan
        out = np.nan
        lab = v
        nd = node
        r = row
        while r >= start:
            if in_set[lab, s]:
                x = _core(code, a_lo, a_hi, consts, reg, row, start, pstart, pend, v, node, nd_pc, nd_parent,
                          prog_arg, var_code, last_off, first_off, cnt_off, lab_off, agg_off, number, cols, stack, 0,
                          float(r), aggv, err)
                if f == AGG_MAX_BY or f == AGG_MIN_BY:
                    key = _core(code, a_hi, b_hi, consts, reg, row, start, pstart, pend, v, node, nd_pc, nd_parent,
                                prog_arg, var_code, last_off, first_off, cnt_off, lab_off, agg_off, number, cols, stack,
                                0, float(r), aggv, err)
                    # walking back, a tie goes to the earlier row (in row order the first one wins)
                    if key == key and (best != best or (key >= best if f == AGG_MAX_BY else key <= best)):
                        best = key
                        out = x
                elif x == x:
                    n += 1
                    if f == AGG_SUM or f == AGG_AVG:
                        acc += x
                    elif f == AGG_ANY:
                        out = x  # walking back: the earliest non-null value is kept
                    elif f == AGG_MIN:
                        out = x if (out != out or x < out) else out
                    elif f == AGG_MAX:
                        out = x if (out != out or x > out) else out
            r -= 1
            if r < start:
                break
            lab = prog_arg[nd_pc[nd]]
            nd = nd_parent[nd]
        if f == AGG_COUNT:
            out = n
        elif f == AGG_SUM:
            out = acc if n > 0 else np.nan
        elif f == AGG_AVG:
            out = acc / n if n > 0 else np.nan
        aggv[w] = out
    return _core(code, lo, hi, consts, reg, row, start, pstart, pend, v, node, nd_pc, nd_parent, prog_arg, var_code,
                 last_off, first_off, cnt_off, lab_off, agg_off, number, cols, stack, 0, -1.0, aggv, err)


@njit(cache=True, nogil=True)
def row_masks(code, c_lo, c_hi, free, consts, var_code, cols, bounds, stop):
    """Per variable and row, its condition when it reads only rows at fixed offsets from the
    current one (``free``): 1 true, 0 false or null; 2 where it must be evaluated per thread (not
    free, or it failed here: a failure counts only where a thread reaches it)."""
    nv = c_lo.shape[0]
    n = cols.shape[1]
    out = np.full((nv, n), 2, np.int8)
    reg = np.empty(1)
    stack = np.empty(256)
    aggv = np.empty(1)
    err = np.zeros(1, np.int64)
    nd = np.empty(1, np.int64)
    dummy = np.zeros(1, np.int64)
    for v in range(nv):
        if not free[v]:
            continue
        if c_hi[v] == c_lo[v]:
            out[v, :] = 1
            continue
        for p in range(bounds.shape[0] - 1):
            if stop[0]:
                return out
            for row in range(bounds[p], bounds[p + 1]):
                x = _core(code, c_lo[v], c_hi[v], consts, reg, row, row, bounds[p], bounds[p + 1], v, -1, nd, nd,
                          dummy, var_code, dummy, dummy, dummy, dummy, dummy, 0, cols, stack, 0, -1.0, aggv, err)
                if err[0] != ERR_NONE:
                    err[0] = ERR_NONE
                else:
                    out[v, row] = 1 if (x == x and x != 0.0) else 0
    return out


@njit(cache=True, nogil=True)
def _hash(pc, bits, base, w):
    h = np.uint64(pc) * np.uint64(0x9E3779B97F4A7C15)
    for k in range(w):
        h ^= np.uint64(bits[base + k])
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    return h


@njit(cache=True, nogil=True)
def match_partitions(op, arg, x, y, c_lo, c_hi, code, walks, w_lo, w_hi, consts, in_set, last_n, last_off, first_n, first_off,
                     cnt_off, lab_off, agg_set, agg_col, agg_off, W, dedup, var_code, cols, bounds, skip_kind,
                     skip_set, masks, starts, max_threads, stop):
    """Every match of every partition, in order: ``(m_part, m_start, m_end, m_number, m_lab, lab_pc,
    n_matches, err, err_row)`` (``m_lab[i]:m_lab[i] + m_end[i] - m_start[i]`` are match i's labels).
    ``masks``: ``row_masks``; ``starts[row]``: a match may start there (a search elsewhere is skipped)."""
    nprog = op.shape[0]
    Wr = max(W, 1)
    cap = 16
    cur_pc = np.empty(cap, np.int64)
    cur_nd = np.empty(cap, np.int64)
    cur_reg = np.empty(cap * Wr)
    nxt_pc = np.empty(cap, np.int64)
    nxt_nd = np.empty(cap, np.int64)
    nxt_reg = np.empty(cap * Wr)
    nxt_bits = nxt_reg.view(np.int64)
    hcap = 64
    h_slot = np.empty(hcap, np.int64)
    h_stamp = np.zeros(hcap, np.int64)
    stamp = 0
    tmp = np.empty(Wr)
    empty = np.empty(Wr)
    init_regs(empty, last_n, last_off, first_n, first_off, cnt_off, lab_off, agg_off)
    nd_pc = np.empty(64, np.int64)
    nd_parent = np.empty(64, np.int64)
    st_pc = np.empty(nprog + 1, np.int64)
    st_state = np.empty(nprog + 1, np.int64)
    onpath = np.zeros(nprog, np.bool_)
    stack = np.empty(256)
    aggv = np.empty(max(walks.shape[0], 1))
    err = np.zeros(1, np.int64)
    n_m = 0
    m_part = np.empty(16, np.int64)
    m_start = np.empty(16, np.int64)
    m_end = np.empty(16, np.int64)
    m_number = np.empty(16, np.int64)
    m_lab = np.empty(16, np.int64)
    lab_pc = np.empty(16, np.int64)
    n_lab = 0
    for p in range(bounds.shape[0] - 1):
        pstart = bounds[p]
        pend = bounds[p + 1]
        number = 1
        s = pstart
        while s < pend:
            if stop[0]:
                return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_STOPPED, s
            if not starts[s]:
                s += 1
                continue
            # ---- the preferred match from s
            n_nd = 0
            best_end = -1
            best_nd = -1
            T = 0
            i = s
            src = empty
            src_base = 0
            src_nd = -1
            initial = True  # the first pass: the closure of the start, at row s
            while True:
                # the closure of each live thread (first: the start), in preferment order
                stamp += 1
                NT = 0
                matched = False
                t = 0
                while initial or t < T:
                    if initial:
                        pc0 = 0
                    else:
                        if stop[0]:
                            return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_STOPPED, s
                        pc = cur_pc[t]
                        v = arg[pc]
                        base = t * Wr
                        for k in range(W):
                            tmp[k] = cur_reg[base + k]
                        take_row(tmp, v, i, in_set, last_n, last_off, first_n, first_off, cnt_off, lab_off,
                                 agg_set, agg_col, agg_off, cols)
                        mv = masks[v, i]
                        ok = mv == 1
                        if mv == 2:
                            r = evaluate(code, c_lo[v], c_hi[v], walks, w_lo[v], w_hi[v], consts, tmp, i, s, pstart,
                                         pend, v, cur_nd[t], nd_pc, nd_parent, arg, var_code, in_set, last_off,
                                         first_off, cnt_off, lab_off, agg_off, number, cols, stack, aggv, err)
                            if err[0] != ERR_NONE:
                                return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, err[0], i
                            ok = r == r and r != 0.0
                        t += 1
                        if not ok:
                            continue
                        nd_pc = grow(nd_pc, n_nd + 1)
                        nd_parent = grow(nd_parent, n_nd + 1)
                        nd_pc[n_nd] = pc
                        nd_parent[n_nd] = cur_nd[t - 1]
                        src_nd = n_nd
                        n_nd += 1
                        src = tmp
                        src_base = 0
                        pc0 = pc + 1
                    at = i if initial else i + 1
                    # depth-first over the epsilon moves from pc0, preferred branch first
                    sp = 1
                    st_pc[0] = pc0
                    st_state[0] = 0
                    while sp > 0:
                        q = st_pc[sp - 1]
                        o = op[q]
                        if st_state[sp - 1] == 0:
                            if o == MATCH:
                                matched = True
                                break
                            if o == CONSUME:
                                sp -= 1
                                if at >= pend:
                                    continue
                                # drop the thread when an equivalent one precedes it
                                if NT + 1 > nxt_pc.shape[0]:
                                    if NT + 1 > max_threads:
                                        return (m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_THREADS,
                                                at)
                                    nxt_pc = grow(nxt_pc, NT + 1)
                                    nxt_nd = grow(nxt_nd, NT + 1)
                                    nxt_reg = grow(nxt_reg, (NT + 1) * Wr)
                                    nxt_bits = nxt_reg.view(np.int64)
                                if 2 * (NT + 1) > hcap:  # a larger table; its entries are this step's
                                    hcap *= 4
                                    h_slot = np.empty(hcap, np.int64)
                                    h_stamp = np.zeros(hcap, np.int64)
                                    stamp += 1
                                    for u in range(NT):
                                        hh = _hash(nxt_pc[u], nxt_bits, u * Wr, W) & np.uint64(hcap - 1)
                                        while h_stamp[hh] == stamp:
                                            hh = (hh + np.uint64(1)) & np.uint64(hcap - 1)
                                        h_stamp[hh] = stamp
                                        h_slot[hh] = u
                                nb = NT * Wr
                                for k in range(W):
                                    nxt_reg[nb + k] = src[src_base + k]
                                dup = False
                                if dedup:
                                    hh = _hash(q, nxt_bits, nb, W) & np.uint64(hcap - 1)
                                    while h_stamp[hh] == stamp:
                                        u = h_slot[hh]
                                        if nxt_pc[u] == q:
                                            same = True
                                            for k in range(W):
                                                if nxt_bits[u * Wr + k] != nxt_bits[nb + k]:
                                                    same = False
                                                    break
                                            if same:
                                                dup = True
                                                break
                                        hh = (hh + np.uint64(1)) & np.uint64(hcap - 1)
                                    if not dup:
                                        h_stamp[hh] = stamp
                                        h_slot[hh] = NT
                                if not dup:
                                    nxt_pc[NT] = q
                                    nxt_nd[NT] = src_nd
                                    NT += 1
                                continue
                            if onpath[q]:  # back at an instruction without consuming a row: cut
                                sp -= 1
                                continue
                            onpath[q] = True
                            st_state[sp - 1] = 2
                            if o == JMP:
                                st_pc[sp] = x[q]
                            elif o == SPLIT:
                                st_state[sp - 1] = 1
                                st_pc[sp] = x[q]
                            elif (at == pstart) if o == ASSERT_START else (at == pend):
                                st_pc[sp] = q + 1
                            else:
                                continue
                            st_state[sp] = 0
                            sp += 1
                        elif st_state[sp - 1] == 1:  # SPLIT: the other branch
                            st_state[sp - 1] = 2
                            st_pc[sp] = y[q]
                            st_state[sp] = 0
                            sp += 1
                        else:
                            onpath[q] = False
                            sp -= 1
                    for u in range(sp):  # a match cut the search: leave no marks
                        onpath[st_pc[u]] = False
                    if matched:
                        best_end = at
                        best_nd = src_nd
                        break  # the threads after this one are cut
                    if initial:
                        break
                # swap
                cur_pc, nxt_pc = nxt_pc, cur_pc
                cur_nd, nxt_nd = nxt_nd, cur_nd
                cur_reg, nxt_reg = nxt_reg, cur_reg
                nxt_bits = nxt_reg.view(np.int64)
                T = NT
                if not initial:
                    i += 1
                initial = False
                if T == 0 or i >= pend:
                    break
            # ---- record it, and where the next search starts
            if best_end < 0:
                s += 1
                continue
            length = best_end - s
            m_part = grow(m_part, n_m + 1)
            m_start = grow(m_start, n_m + 1)
            m_end = grow(m_end, n_m + 1)
            m_number = grow(m_number, n_m + 1)
            m_lab = grow(m_lab, n_m + 1)
            lab_pc = grow(lab_pc, n_lab + length)
            m_part[n_m] = p
            m_start[n_m] = s
            m_end[n_m] = best_end
            m_number[n_m] = number
            m_lab[n_m] = n_lab
            nd = best_nd
            for k in range(length - 1, -1, -1):
                lab_pc[n_lab + k] = nd_pc[nd]
                nd = nd_parent[nd]
            n_m += 1
            number += 1
            if length == 0 or skip_kind == SKIP_NEXT:
                s += 1
            elif skip_kind == SKIP_PAST:
                s = best_end
            else:
                target = -1
                for k in range(length):
                    if in_set[arg[lab_pc[n_lab + k]], skip_set]:
                        if skip_kind == SKIP_FIRST:
                            target = s + k
                            break
                        target = s + k
                if target < 0:
                    return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_SKIP_ABSENT, s
                if target == s:
                    return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_SKIP_FIRST_ROW, s
                s = target
            n_lab += length
    return m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, ERR_NONE, -1
