"""Running a standard-mode query in process: the input sorted by partition and ORDER BY, the
columns DEFINE reads coded as float64, the kernel over every partition, then the output rows
and MEASURES."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.inputs import as_table
from colcep.engine.keys import dictionary_encoded
from colcep.engine.interrupt import call, new_stop_flag
from colcep.errors import CapacityError
from colcep.kernels import rowpattern as K
from colcep.kernels.arrays import group_by_key
from colcep.lang.sql.limits import deep_stack
from colcep.lang.sql.standard.measures import Frame, Matches, rowwise
from colcep.lang.sql.standard.program import Program, compile_program
from colcep.lang.sql.standard.syntax import Query, StdError, parse

MAX_THREADS = 1 << 20  # live threads one search may hold before it is a CapacityError (a few hundred MB)


def run(query: str, tables: dict[str, Any]) -> pa.Table:
    """The query over in-process tables (pyarrow, pandas or polars)."""
    q = parse(query)
    if q.table not in tables:
        if len(tables) != 1 or q.table:
            raise StdError(f"FROM: unknown table {q.table!r}: pass it as colcep.sql(query, {q.table or 't'}=table)")
        q.table = next(iter(tables))
    with deep_stack(query):
        return run_table(q, as_table(tables[q.table]))


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_null(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return "time"
    return "other"


def _names(tbl: pa.Table) -> dict[str, str]:
    names: dict[str, str] = {}
    for c in tbl.column_names:
        if c.lower() in names:
            raise StdError(f"FROM: the input has two columns named {c!r}" if names[c.lower()] == c else
                           f"FROM: columns {names[c.lower()]!r} and {c!r} differ only in case; SQL names are not "
                           "case-sensitive: rename one")
        names[c.lower()] = c
    return names


def _column(names: dict[str, str], name: str, clause: str) -> str:
    name = name[1:-1] if len(name) > 1 and name[0] == name[-1] == '"' else name
    if name.lower() not in names:
        raise StdError(f"{clause}: no column {name!r} in the input (columns: {', '.join(names.values())})")
    return names[name.lower()]


def run_table(q: Query, tbl: pa.Table) -> pa.Table:
    names = _names(tbl)
    part = [_column(names, c, "PARTITION BY") for c in q.partition]
    order = [(_column(names, c, "ORDER BY"), desc, nulls_first) for c, desc, nulls_first in q.order]
    kinds = {c.lower(): _kind(tbl.schema.field(c).type) for c in tbl.column_names}
    prog = compile_program(q, kinds, lambda node: _kind(rowwise(node, tbl.slice(0, 0), names).type))
    n = tbl.num_rows
    perm, bounds = _order(tbl, part, order)
    work = tbl
    cols, var_code, consts = _encode(prog, work, names, perm)
    stop = new_stop_flag()
    masks = call(K.row_masks, prog.code, prog.c_lo, prog.c_hi, prog.free, consts, var_code, cols, bounds, stop,
                 stop=stop)
    if stop[0]:
        raise KeyboardInterrupt
    starts = np.ones(n, bool) if prog.empty else (masks[prog.first] != 0).any(axis=0)
    res = call(K.match_partitions, prog.op, prog.arg, prog.x, prog.y, prog.c_lo, prog.c_hi, prog.code, prog.walks,
               prog.w_lo, prog.w_hi, consts,
               prog.in_set, prog.last_n, prog.last_off, prog.first_n, prog.first_off, prog.cnt_off, prog.lab_off,
               prog.agg_set, prog.agg_col, prog.agg_off, prog.width, prog.dedup, var_code, cols, bounds,
               prog.skip_kind, prog.skip_set, masks, starts, MAX_THREADS, stop, stop=stop)
    m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, err, err_row = res  # noqa: F841 - lab_pc cut below
    _raise(int(err), int(perm[err_row]) if err_row >= 0 else -1, q, work, order)
    m_part, m_start, m_end, m_number, m_lab = (a[:n_m] for a in (m_part, m_start, m_end, m_number, m_lab))
    n_lab = int((m_end - m_start).sum())
    lab_pc = lab_pc[:n_lab]
    mt = Matches(work, perm, names, prog.variables, q.subsets, m_start, m_end, m_number, m_lab, prog.arg[lab_pc],
                 bounds[m_part], bounds[m_part + 1])
    return _output(q, prog, mt, part, [c for c, _, _ in order], prog.excluded[lab_pc], bounds)


def _codes(tbl: pa.Table, part: list[str]) -> tuple[np.ndarray, int]:
    """Per row its partition's number (partitions numbered in order of first appearance; NULL is
    a partition, numbered last for a single column), and how many there are."""
    n = tbl.num_rows
    codes, count = np.zeros(n, np.int64), 1 if n else 0
    for j, c in enumerate(part):
        col = tbl.column(c)
        # a dictionary column's own dictionary may hold a value twice or unused: its values are coded anew
        enc = dictionary_encoded(_sortable(col) if pa.types.is_dictionary(col.type) else col)
        k = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
        if j == 0:                                  # codes in order of first appearance already
            codes, count = k, len(enc.dictionary) + (1 if col.null_count else 0)
            continue
        both = codes * (len(enc.dictionary) + 1) + k
        uniq, first, codes = np.unique(both, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        codes, count = rank[codes.ravel()], len(uniq)
    return codes, count


def time_ints(a, unit: str):
    """A time column as int64 in ``unit`` (dates and timestamps from the epoch, times of day from
    midnight, durations); an ArrowInvalid when a value does not fit or would lose precision."""
    t = a.type
    if pa.types.is_date(t):
        a, t = pc.cast(a, pa.timestamp("ms")), pa.timestamp("ms")
    if pa.types.is_timestamp(t):
        target = pa.timestamp(unit, t.tz)
    elif pa.types.is_time(t):
        target = pa.time64(unit) if unit in ("us", "ns") else pa.time32(unit)
    else:
        target = pa.duration(unit)
    return pc.cast(pc.cast(a, target), pa.int64())


def _times_as_floats(times: dict[str, pa.Array]) -> dict[str, np.ndarray]:
    """Time columns as float64 that compare exactly: in the finest unit (ns, us, ms, s) that holds
    every value without overflow or loss, from the earliest value of them all, within float64's
    53 bits (104 days at ns, 285 years at us); NULL as NaN."""
    for unit in ("ns", "us", "ms", "s"):
        try:
            ints = {k: time_ints(a, unit) for k, a in times.items()}
        except (pa.ArrowInvalid, OverflowError):
            continue
        present = [pc.min_max(x) for x in ints.values() if x.null_count < len(x)]
        if not present:
            return {k: np.full(len(x), np.nan) for k, x in ints.items()}
        lo = min(mm["min"].as_py() for mm in present)
        hi = max(mm["max"].as_py() for mm in present)
        if hi - lo < 2 ** 53:
            return {k: pc.subtract(x, lo).to_numpy(zero_copy_only=False).astype(np.float64) for k, x in ints.items()}
    raise StdError("DEFINE: the time columns' values cannot be compared exactly in float64 (their span and "
                   "precision are too large together)")


def _sortable(a):
    """A column as Arrow sorts it: dictionaries by their values."""
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return a.dictionary_decode() if pa.types.is_dictionary(a.type) else a


def _ordered(tbl: pa.Table, order: list[tuple[str, bool, bool]]) -> bool:
    """Are the rows already in ORDER BY order (numbers or times, no NULLs)? Then a stable
    grouping by partition orders them, in linear time."""
    if not order or not tbl.num_rows:
        return True
    tie = np.ones(tbl.num_rows - 1, bool)         # rows equal on the columns so far
    for c, desc, _ in order:
        col = _sortable(tbl.column(c))
        t = col.type
        if col.null_count or not (pa.types.is_integer(t) or pa.types.is_floating(t) or _kind(t) == "time"):
            return False
        x = col.view(pa.int32() if t.bit_width == 32 else pa.int64()) if _kind(t) == "time" else col
        x = x.to_numpy(zero_copy_only=False)
        if pa.types.is_floating(t) and np.isnan(x).any():
            return False
        step = (x[:-1] >= x[1:]) if desc else (x[:-1] <= x[1:])
        if not step[tie].all():
            return False
        tie &= x[:-1] == x[1:]
        if not tie.any():
            break
    return True


def _order(tbl: pa.Table, part: list[str], order: list[tuple[str, bool, bool]]) -> tuple[np.ndarray, np.ndarray]:
    """The rows in partition-then-ORDER-BY order (``perm``: sorted position -> row; ties keep
    input order) and the partitions' bounds in it."""
    codes, count = _codes(tbl, part)
    if _ordered(tbl, order):
        perm, bounds = group_by_key(codes, count)
        return perm, bounds
    cols, keys = [pa.array(codes)], [("p", "ascending")]
    for k, (c, desc, nulls_first) in enumerate(order):   # NULLS FIRST / LAST per column: a validity key
        col = _sortable(tbl.column(c))
        if col.null_count:
            cols.append(pc.is_valid(col))
            keys.append((f"v{k}", "ascending" if nulls_first else "descending"))
        cols.append(col)
        keys.append((f"o{k}", "descending" if desc else "ascending"))
    keyed = pa.Table.from_arrays(cols, names=[name for name, _ in keys])
    perm = pc.sort_indices(keyed, sort_keys=keys).to_numpy()
    bounds = np.searchsorted(codes[perm], np.arange(count + 1)).astype(np.int64)
    return perm, bounds


def _encode(prog: Program, work: pa.Table, names: dict[str, str], perm: np.ndarray):
    """The columns DEFINE reads as float64 rows in ``perm`` order (strings as codes of one sorted
    dictionary that also holds the query's string literals and the variables' names), the
    variables' codes and the constants."""
    arrays = {}
    for name in prog.columns.used:
        if name in prog.columns.derived:
            arrays[name] = rowwise(prog.columns.derived[name], work, names)
        else:
            col = work.column(names[name]).combine_chunks()
            arrays[name] = col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
    strings = {c for c in prog.consts if isinstance(c, str)} | set(prog.variables)
    for name, a in arrays.items():
        if prog.columns.kinds[name] == "str":
            arrays[name] = a = pc.cast(a, pa.string())
            strings |= {s for s in pc.unique(a).to_pylist() if s is not None}
    dictionary = sorted(strings)
    lookup = pa.array(dictionary, pa.string())
    cols = np.empty((max(len(arrays), 1), work.num_rows))
    times = _times_as_floats({name: a for name, a in arrays.items() if prog.columns.kinds[name] == "time"})
    for k, (name, a) in enumerate(arrays.items()):
        kind = prog.columns.kinds[name]
        if kind == "time":
            cols[k] = times[name][perm]
            continue
        if kind == "str":
            v = pc.index_in(a, value_set=lookup)
        elif kind in ("int", "float", "bool"):
            v = a
        else:
            raise StdError(f"DEFINE: column {name!r} of type {a.type} cannot be compared in a condition")
        if kind == "int" and len(v) and v.null_count < len(v):
            lo, hi = pc.min_max(v).values()
            if max(abs(lo.as_py()), abs(hi.as_py())) > 2 ** 53:
                raise StdError(f"DEFINE: column {name!r} holds integers beyond 2**53, which conditions would "
                               "compare inexactly")
        x = pc.cast(v, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        cols[k] = x[perm]
    code_of = {s: float(i) for i, s in enumerate(dictionary)}
    consts = np.array([code_of[c] if isinstance(c, str) else float(c) for c in prog.consts] or [0.0])
    var_code = np.array([code_of[v] for v in prog.variables], np.float64)
    return cols, var_code, consts


def _raise(err: int, row: int, q: Query, work: pa.Table, order) -> None:
    if err == K.ERR_NONE:
        return
    where = f" (at the row with {order[0][0]} = {work.column(order[0][0])[row].as_py()!r})" if order and row >= 0 \
        else ""
    if err == K.ERR_SKIP_ABSENT:
        raise StdError(f"AFTER MATCH SKIP failed: pattern variable is not present in match{where}")
    if err == K.ERR_SKIP_FIRST_ROW:
        raise StdError(f"AFTER MATCH SKIP failed: cannot skip to first row of match{where}")
    if err == K.ERR_DIV_ZERO:
        raise StdError(f"DEFINE: Division by zero{where}")
    if err == K.ERR_THREADS:
        raise CapacityError(f"MATCH_RECOGNIZE: a search holds more than {MAX_THREADS} live threads{where}; the "
                            "pattern's conditions tell too many histories apart")
    raise KeyboardInterrupt


def _output(q: Query, prog: Program, mt: Matches, part: list[str], order: list[str], excluded: np.ndarray,
            bounds: np.ndarray) -> pa.Table:
    """The output rows (Trino's layout: partition columns, for ALL ROWS the ORDER BY columns,
    the measures, then for ALL ROWS the other columns) and the SELECT list over them."""
    work = mt.table
    perm = mt.perm
    nm = len(mt.start)
    length = mt.end - mt.start
    if q.rows == "one":
        m = np.arange(nm)
        k = length - 1
        rows = mt.start.copy()
        key = (mt.start, np.zeros(nm, np.int64))
    else:
        empty = length == 0
        lab_m = np.repeat(np.arange(nm), length)
        lab_k = np.arange(len(lab_m)) - np.repeat(mt.lab, length) if nm else np.zeros(0, np.int64)
        keep = ~excluded
        m, k = lab_m[keep], lab_k[keep]
        if q.rows != "all_omit":                       # an empty match shows as one row
            em = np.flatnonzero(empty)
            m, k = np.r_[m, em], np.r_[k, np.full(len(em), -1)]
        rows = mt.start[m] + np.maximum(k, 0)
        key = (mt.start[m], k)
        if q.rows == "all_unmatched":
            covered = np.zeros(work.num_rows, bool)
            if nm:
                covered[np.repeat(mt.start, length) + lab_k] = True
                covered[mt.start[empty]] = True
            un = np.flatnonzero(~covered)
            m, k, rows = np.r_[m, np.full(len(un), -1)], np.r_[k, np.full(len(un), -1)], np.r_[rows, un]
            key = (np.r_[key[0], un], np.r_[key[1], np.full(len(un), -1)])
    by = np.lexsort((key[1], key[0]))           # rows are sorted by partition: the start orders them
    m, k, rows = m[by].astype(np.int64), k[by].astype(np.int64), rows[by].astype(np.int64)
    frame = Frame(mt, m, k, running=q.rows != "one")
    take = pa.array(perm[rows])
    names, arrays = [], []
    for c in part + (order if q.rows != "one" else []):     # an ORDER BY column listed twice comes out twice
        names.append(c)
        arrays.append(work.column(c).take(take))
    unmatched = pa.array(m < 0)
    for name, node in q.measures:                             # an unmatched row's measures are null
        v = frame._full(frame.ev(node, final=False))
        names.append(name)
        arrays.append(pc.if_else(unmatched, pa.scalar(None, v.type), v) if q.rows == "all_unmatched" else v)
    if q.rows != "one":
        for c in work.column_names:
            if c not in part and c not in order:
                names.append(c)
                arrays.append(work.column(c).take(take))
    table = pa.Table.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                 names=names)
    if not q.select:
        return table
    lower = {c.lower(): c for c in table.column_names}
    sel = {}
    for src, name in q.select:
        if src not in lower:
            raise StdError(f"SELECT: no column {src!r} in the MATCH_RECOGNIZE output ({', '.join(table.column_names)})")
        sel[name] = table.column(table.column_names.index(lower[src]))
    return pa.table(sel)
