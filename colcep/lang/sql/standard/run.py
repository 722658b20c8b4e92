"""Running a standard-mode query in process: the input sorted by partition and ORDER BY, the
columns DEFINE reads coded as float64, the kernel over every partition, then the output rows
and MEASURES."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.inputs import as_table
from colcep.engine.interrupt import call, new_stop_flag
from colcep.errors import CapacityError
from colcep.kernels import rowpattern as K
from colcep.lang.sql.standard.measures import Frame, Matches, rowwise
from colcep.lang.sql.standard.program import Program, compile_program
from colcep.lang.sql.standard.syntax import Query, StdError, parse

MAX_THREADS = 1 << 22  # live threads one search may hold before it is a CapacityError


def run(query: str, tables: dict[str, Any]) -> pa.Table:
    """The query over in-process tables (pyarrow, pandas or polars)."""
    q = parse(query)
    if q.table not in tables:
        if len(tables) != 1 or q.table:
            raise StdError(f"FROM: unknown table {q.table!r}: pass it as colcep.sql(query, {q.table or 't'}=table)")
        q.table = next(iter(tables))
    return run_table(q, as_table(tables[q.table]))


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_null(t):
        return "float"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return "str"
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return "time"
    return "other"


def _names(tbl: pa.Table) -> dict[str, str]:
    names: dict[str, str] = {}
    for c in tbl.column_names:
        if c.lower() in names:
            raise StdError(f"FROM: columns {names[c.lower()]!r} and {c!r} differ only in case; SQL names are not "
                           "case-sensitive: rename one")
        names[c.lower()] = c
    return names


def _column(names: dict[str, str], name: str, clause: str) -> str:
    if name.lower() not in names:
        raise StdError(f"{clause}: no column {name!r} in the input (columns: {', '.join(names.values())})")
    return names[name.lower()]


def run_table(q: Query, tbl: pa.Table) -> pa.Table:
    names = _names(tbl)
    part = [_column(names, c, "PARTITION BY") for c in q.partition]
    order = [(_column(names, c, "ORDER BY"), desc) for c, desc in q.order]
    kinds = {c.lower(): _kind(tbl.schema.field(c).type) for c in tbl.column_names}
    prog = compile_program(q, kinds)
    # rows by partition, then ORDER BY (stable: input order breaks ties)
    keys = [(c, "ascending") for c in part] + [(c, "descending" if d else "ascending") for c, d in order]
    work = tbl.take(pc.sort_indices(tbl, sort_keys=keys)) if keys and tbl.num_rows else tbl
    n = work.num_rows
    change = np.zeros(max(n - 1, 0), bool)
    for c in part:
        col = work.column(c).combine_chunks() if n else work.column(c)
        codes = pc.fill_null(pc.dictionary_encode(col).indices, -1).to_numpy(zero_copy_only=False) if n else \
            np.zeros(0, np.int64)
        change |= codes[1:] != codes[:-1]
    bounds = np.r_[0, np.flatnonzero(change) + 1, n].astype(np.int64) if n else np.zeros(1, np.int64)
    cols, var_code, consts = _encode(prog, work, names)
    stop = new_stop_flag()
    res = call(K.match_partitions, prog.op, prog.arg, prog.x, prog.y, prog.c_lo, prog.c_hi, prog.code, prog.walks,
               prog.w_lo, prog.w_hi, consts,
               prog.in_set, prog.last_n, prog.last_off, prog.first_n, prog.first_off, prog.cnt_off, prog.lab_off,
               prog.agg_set, prog.agg_col, prog.agg_off, prog.width, prog.dedup, var_code, cols, bounds,
               prog.skip_kind, prog.skip_set, MAX_THREADS, stop, stop=stop)
    m_part, m_start, m_end, m_number, m_lab, lab_pc, n_m, err, err_row = res  # noqa: F841 - lab_pc cut below
    _raise(int(err), int(err_row), q, work, order)
    m_part, m_start, m_end, m_number, m_lab = (a[:n_m] for a in (m_part, m_start, m_end, m_number, m_lab))
    n_lab = int((m_end - m_start).sum())
    lab_pc = lab_pc[:n_lab]
    mt = Matches(work, names, prog.variables, q.subsets, m_start, m_end, m_number, m_lab, prog.arg[lab_pc],
                 bounds[m_part], bounds[m_part + 1])
    return _output(q, prog, mt, part, [c for c, _ in order], prog.excluded[lab_pc], bounds)


def _encode(prog: Program, work: pa.Table, names: dict[str, str]):
    """The columns DEFINE reads as float64 rows (strings as codes of one sorted dictionary that
    also holds the query's string literals and the variables' names), the variables' codes and
    the constants."""
    arrays = {}
    for name in prog.columns.used:
        if name in prog.columns.derived:
            arrays[name] = rowwise(prog.columns.derived[name], work, names)
        else:
            col = work.column(names[name])
            arrays[name] = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    strings = {c for c in prog.consts if isinstance(c, str)} | set(prog.variables)
    for name, a in arrays.items():
        if prog.columns.kinds[name] == "str":
            a = a.dictionary_decode() if pa.types.is_dictionary(a.type) else a
            arrays[name] = a = pc.cast(a, pa.string())
            strings |= {s for s in pc.unique(a).to_pylist() if s is not None}
    dictionary = sorted(strings)
    lookup = pa.array(dictionary, pa.string())
    cols = np.empty((max(len(arrays), 1), work.num_rows))
    for k, (name, a) in enumerate(arrays.items()):
        kind = prog.columns.kinds[name]
        if kind == "str":
            v = pc.index_in(a, value_set=lookup)
        elif kind == "time":
            v = pc.cast(a.cast(pa.timestamp("us")) if pa.types.is_date(a.type) else a, pa.int64()) \
                if not pa.types.is_integer(a.type) else a
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
        cols[k] = x
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
    take = pa.array(rows)
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
