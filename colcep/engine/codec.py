"""Snapshot bytes of a Matcher's state: versioned, checksummed, bound to the pattern.

Layout (little-endian)::

    b"COLCEP-SNAPSHOT\\n"   16 bytes of magic
    u32 header length, then the header: UTF-8 JSON with the format version, the program's
        fingerprint, the Matcher's settings, the counters and a table of the blobs
    the blobs: numpy arrays as raw bytes, Arrow IPC streams (key values, strings, the
        schema, retained input rows, rows waiting for the watermark)
    32 bytes: SHA-256 of everything before

The state is compacted on the way out: only the buffer nodes that live runs and held matches
reach, renumbered, and only the input rows those nodes refer to, so a snapshot's size tracks
live partial matches, not the stream's length. ``keys=`` exports a subset of the keys.

Format 2 is format 1 with a composite key (``key=["symbol", "venue"]``): the settings' ``key``
is the list of key columns and the ``keys`` table has one column per key column, under its
name (format 1: one column ``key``). A Matcher with one key column (or none) still writes
format 1, byte for byte as before, so older colcep reads it; this version reads both.

Optional sections (a reader skips what it does not know; formats 1 and 2): ``history.ptr``,
``history.count``, ``history.ts``, ``history.vals``, the rows per key that ``prev`` /
``rolling`` still reach and each key's row count (``colcep.engine.history``), present when the pattern
reads history; absent, the history is empty.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
import hashlib
import io
import json
import struct
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from colcep.errors import SnapshotError
from colcep.kernels import compact as kcompact
from colcep.kernels.compact import compact_buffer
from colcep.kernels.buffer import JOIN
from colcep.engine.keys import KeyCodes
from colcep.engine.shards import merged
from colcep.engine.state import Buffer, Held, MatcherState, Runs, select_keys

if TYPE_CHECKING:
    from colcep.engine.program import CompiledPattern

MAGIC = b"COLCEP-SNAPSHOT\n"
FORMAT = 2  # the newest format this version reads and writes (2: composite keys)
_ROW = "__colcep_row"


# ------------------------------------------------------------------------------------ encode
@dataclass
class Snapshot:
    """What snapshot bytes hold: the Matcher's settings (its constructor's arguments), its state
    in the one-thread layout, and the schema its first batch bound (None before one)."""

    settings: dict
    state: MatcherState
    schema: pa.Schema | None


def encode(snap: Snapshot, fingerprint: str, keys: Sequence[Any] | None = None) -> bytes:
    """Snapshot bytes of ``snap`` (only keys ``keys``, if given), bound to the program's fingerprint."""
    st = merged(snap.state)  # a threaded Matcher's shards, in the one-thread layout
    settings = snap.settings
    codes = _selected_codes(st.keys, keys)
    runs, held = select_keys(st.runs, codes), select_keys(st.held, codes)
    n_runs = runs.state.shape[0]
    roots = np.concatenate([runs.node, held.node]).astype(np.int64)
    buf = st.buffer
    row, stage, parent, ref, new_roots = compact_buffer(buf.row, buf.stage, buf.parent, int(buf.meta[0]), roots)
    runs.node, held.node = new_roots[:n_runs], new_roots[n_runs:]
    blobs = _Blobs()
    for name, a in (("runs.ptr", runs.ptr), ("runs.state", runs.state), ("runs.node", runs.node),
                    ("runs.start_ts", runs.start_ts), ("runs.start_pos", runs.start_pos), ("runs.v", runs.v),
                    ("held.ptr", held.ptr), ("held.start_ts", held.start_ts), ("held.start_pos", held.start_pos),
                    ("held.end_pos", held.end_pos), ("held.node", held.node),
                    ("buffer.row", row), ("buffer.stage", stage), ("buffer.parent", parent), ("buffer.ref", ref),
                    ("start_dead", _per_key(st.start_dead, codes, 0)),
                    ("key_last_ts", _per_key(st.key_last_ts, codes, np.iinfo(np.int64).min))):
        blobs.array(name, a)
    if st.history is not None:
        h = st.history.select(codes)
        for name, a in (("history.ptr", h.ptr), ("history.count", h.count), ("history.ts", h.ts),
                        ("history.vals", h.vals)):
            blobs.array(name, a)
    blobs.table("keys", _key_table(st.keys, snap.schema, codes))
    blobs.table("strings", pa.table({"s": pa.array(sorted(st.strings, key=st.strings.get), pa.large_string())}))
    if snap.schema is not None:
        blobs.raw("schema", snap.schema.serialize().to_pybytes())
        live_rows = np.unique(row[(stage != JOIN)]) if row.shape[0] else np.zeros(0, np.int64)
        blobs.table("retained", _retained_rows(st.retained, live_rows))
        if st.pending is not None and st.pending.num_rows:
            blobs.table("pending", _pending_for(st.pending, settings["key"], st.keys, keys))
    header = {
        "format": 2 if st.keys.composite else 1, "fingerprint": fingerprint,
        "settings": {**settings, "out_of_orderness": _duration_out(settings["out_of_orderness"])},
        "counters": {"rows_seen": st.rows_seen, "rows_fed": st.rows_fed, "matches_out": st.matches_out,
                     "late_rows": st.late_rows, "watermark": st.watermark, "max_ts": st.max_ts,
                     "ticked": st.ticked},
        "blobs": blobs.index,
    }
    head = json.dumps(header, sort_keys=True).encode()
    body = MAGIC + struct.pack("<I", len(head)) + head + blobs.data.getvalue()
    return body + hashlib.sha256(body).digest()


class _Blobs:
    def __init__(self):
        self.data = io.BytesIO()
        self.index: dict[str, dict] = {}

    def raw(self, name: str, b: bytes, **meta: Any) -> None:
        self.index[name] = {"offset": self.data.tell(), "length": len(b), **meta}
        self.data.write(b)

    def array(self, name: str, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        self.raw(name, a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(), dtype=a.dtype.str.lstrip("<>|="),
                 shape=list(a.shape))

    def table(self, name: str, t: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        self.raw(name, sink.getvalue().to_pybytes())


def _key_table(keys: KeyCodes, schema: pa.Schema | None, codes: list[int]) -> pa.Table:
    """The values of keys ``codes``: column ``key`` (format 1), or one column per key column."""
    if not keys.names:
        return pa.table({"key": pa.array([keys.values[c] for c in codes], pa.null())})
    types = list(keys.types)
    if types[0] is None:  # no row fed yet (event time: all waiting): the bound schema knows them
        types = [schema.field(k).type if schema is not None else pa.null() for k in keys.names]
    values = [keys.values[c] for c in codes]
    if not keys.composite:
        return pa.table({"key": pa.array(values, types[0])})
    cols = list(zip(*values)) if values else [() for _ in keys.names]
    return pa.table({k: pa.array(list(c), t) for k, c, t in zip(keys.names, cols, types)})


def _selected_codes(keys: KeyCodes, wanted: Sequence[Any] | None) -> list[int]:
    if wanted is None:
        return list(range(keys.n))
    wanted = [keys.as_value(k) for k in wanted]
    return [keys.codes[k] for k in dict.fromkeys(wanted) if k in keys.codes]


def _per_key(a: np.ndarray, codes: list[int], fill) -> np.ndarray:
    out = np.full(len(codes), fill, a.dtype)
    for i, c in enumerate(codes):
        if c < a.shape[0]:
            out[i] = a[c]
    return out


def _retained_rows(blocks: list, rows: np.ndarray) -> pa.Table:
    """The retained input rows whose feeding positions are ``rows`` (sorted), with those positions."""
    parts = []
    for start, t in blocks:
        ids = start if isinstance(start, np.ndarray) else np.arange(start, start + t.num_rows, dtype=np.int64)
        pos = np.flatnonzero(np.isin(ids, rows, assume_unique=True))
        if len(pos):
            sub = t.take(pa.array(pos))
            parts.append(sub.append_column(_ROW, pa.array(ids[pos], pa.int64())))
    if not parts:
        return pa.table({_ROW: pa.array([], pa.int64())})
    return pa.concat_tables(parts)


def _pending_for(pending: pa.Table, key: Any, keys: KeyCodes, wanted) -> pa.Table:
    """The rows waiting for the watermark whose key is in ``wanted`` (fed yet or not)."""
    if wanted is None or key is None or pending.num_rows == 0:
        return pending
    chosen = {keys.as_value(k) for k in wanted}
    local, values = KeyCodes(key).local(pending)
    keep = np.array([v in chosen for v in values], bool)  # per distinct key of the waiting rows
    return pending.filter(pa.array(keep[local]))


def _duration_out(d: Any) -> Any:
    if isinstance(d, _dt.timedelta):
        return {"timedelta_us": (d.days * 86400 + d.seconds) * 10**6 + d.microseconds}
    return int(d) if isinstance(d, (int, np.integer)) else d


def _duration_in(d: Any) -> Any:
    if isinstance(d, dict):
        return _dt.timedelta(microseconds=d["timedelta_us"])
    return d


# ------------------------------------------------------------------------------------ decode
def decode(program: "CompiledPattern", data: bytes) -> Snapshot:
    """The snapshot in ``data``, checked against ``program`` (its fingerprint, its structure and
    everything the kernels index): ``SnapshotError`` for anything else, whatever the bytes."""
    try:
        return _decode(program, data)
    except SnapshotError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, struct.error,
            pa.ArrowException) as e:
        raise SnapshotError(f"the snapshot is malformed ({type(e).__name__}: {e}); nothing was restored") from None


def _decode(program: "CompiledPattern", data: bytes) -> Snapshot:
    header, blobs = _parse(data)
    if header["fingerprint"] != program.fingerprint:
        raise SnapshotError("the snapshot was taken with a different pattern (program fingerprint "
                            f"{header['fingerprint'][:12]}, this pattern's is {program.fingerprint[:12]}); "
                            "restore it with the pattern it was taken with")
    s = dict(header["settings"])
    s["out_of_orderness"] = _duration_in(s["out_of_orderness"])
    st = MatcherState.new(s["key"], program.v_width, program.literals)
    st.shards = None  # read in the one-thread layout, split at the end
    st.runs = Runs(*(blobs.array(f"runs.{n}") for n in ("ptr", "state", "node", "start_ts", "start_pos", "v")))
    st.held = Held(*(blobs.array(f"held.{n}") for n in ("ptr", "start_ts", "start_pos", "end_pos", "node")))
    row, stage, parent, ref = (blobs.array(f"buffer.{n}") for n in ("row", "stage", "parent", "ref"))
    for what, arrays in (("runs", st.runs.arrays()[1:]), ("held matches", st.held.arrays()[1:]),
                         ("buffer", (row, stage, parent, ref))):
        if len({a.shape[0] for a in arrays}) > 1:
            raise SnapshotError(f"the snapshot's {what} arrays differ in length")
    st.buffer = Buffer.from_nodes(row, stage, parent, ref)
    st.start_dead = blobs.array("start_dead").copy()
    st.key_last_ts = blobs.array("key_last_ts").copy()
    if "history.ptr" in header["blobs"]:
        from colcep.engine.history import History
        st.history = History(*(blobs.array(f"history.{n}") for n in ("ptr", "count", "ts", "vals")))
    kt = blobs.table("keys")
    if st.keys.composite:
        if kt.column_names != st.keys.names:
            raise SnapshotError(f"the snapshot's key table has columns {kt.column_names}, not its key columns "
                                f"{st.keys.names}")
        keys = list(zip(*(kt.column(k).to_pylist() for k in st.keys.names)))
    else:
        keys = kt.column("key").to_pylist()
    st.keys.codes = {k: i for i, k in enumerate(keys)}
    st.keys.values = list(keys)
    if st.keys.names and not any(pa.types.is_null(f.type) for f in kt.schema):
        st.keys.types = list(kt.schema.types)
    st.strings = {v: i for i, v in enumerate(blobs.table("strings").column("s").to_pylist())}
    c = header["counters"]
    st.rows_seen, st.rows_fed, st.matches_out = c["rows_seen"], c["rows_fed"], c["matches_out"]
    st.late_rows, st.watermark, st.max_ts, st.ticked = c["late_rows"], c["watermark"], c["max_ts"], c["ticked"]
    schema = None
    if "schema" in header["blobs"]:
        schema = pa.ipc.read_schema(pa.py_buffer(blobs.raw("schema")))
        ret = blobs.table("retained")
        if ret.num_rows:
            ids = np.asarray(ret.column(_ROW).to_numpy(), np.int64)
            st.retained = [(ids, ret.drop_columns([_ROW]))]
        if "pending" in header["blobs"]:
            st.pending = blobs.table("pending")
    _check_counters(st)
    _check_consistent(st, program)
    _check_indices(st, program, retains=s.get("columns") != [] or s.get("out_of_orderness") is not None)
    return Snapshot(s, st, schema)


# the dtype and number of dimensions of every array section
_DTYPES = {"runs.ptr": ("int64", 1), "runs.state": ("int32", 1), "runs.node": ("int64", 1),
           "runs.start_ts": ("int64", 1), "runs.start_pos": ("int64", 1), "runs.v": ("float64", 2),
           "held.ptr": ("int64", 1), "held.start_ts": ("int64", 1), "held.start_pos": ("int64", 1),
           "held.end_pos": ("int64", 1), "held.node": ("int64", 1), "buffer.row": ("int64", 1),
           "buffer.stage": ("int32", 1), "buffer.parent": ("int64", 1), "buffer.ref": ("int32", 1),
           "start_dead": ("uint8", 1), "key_last_ts": ("int64", 1), "history.ptr": ("int64", 1),
           "history.count": ("int64", 1), "history.ts": ("int64", 1), "history.vals": ("float64", 2)}


class _Reader:
    def __init__(self, index: dict, body: memoryview):
        self.index, self.body = index, body

    def raw(self, name: str) -> bytes:
        if name not in self.index:
            raise SnapshotError(f"the snapshot has no {name!r} section")
        e = self.index[name]
        if e["offset"] < 0 or e["offset"] + e["length"] > len(self.body):
            raise SnapshotError(f"the snapshot's {name!r} section lies outside the data")
        return bytes(self.body[e["offset"]:e["offset"] + e["length"]])

    def array(self, name: str) -> np.ndarray:
        e = self.index[name]
        want = _DTYPES[name]
        try:
            dt = np.dtype(e["dtype"])
            shape = tuple(int(x) for x in e["shape"])
        except (TypeError, ValueError, KeyError) as err:
            raise SnapshotError(f"the snapshot's {name!r} section has no valid type and shape ({err})") from None
        if dt != np.dtype(want[0]) or len(shape) != want[1] or min(shape, default=0) < 0:
            raise SnapshotError(f"the snapshot's {name!r} section is {dt}{list(shape)}, not {want[1]}-D {want[0]}")
        raw = self.raw(name)
        if len(raw) != dt.itemsize * int(np.prod(shape)):
            raise SnapshotError(f"the snapshot's {name!r} section holds {len(raw)} bytes, not its shape's")
        a = np.frombuffer(raw, dtype=dt.newbyteorder("<"))
        return a.astype(dt, copy=True).reshape(shape)

    def table(self, name: str) -> pa.Table:
        return pa.ipc.open_stream(pa.py_buffer(self.raw(name))).read_all()


def _parse(data: bytes) -> tuple[dict, _Reader]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SnapshotError(f"expected snapshot bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < len(MAGIC) + 4 + 32 or not data.startswith(MAGIC):
        raise SnapshotError("not a colcep snapshot (the bytes do not start with colcep's snapshot marker)")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotError("the snapshot is corrupt (its SHA-256 checksum does not match); nothing was restored")
    (n,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start:start + n])
    except ValueError as e:
        raise SnapshotError(f"the snapshot's header is not valid JSON: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("format"), int):
        raise SnapshotError("the snapshot's header has no format version")
    if header["format"] > FORMAT:
        raise SnapshotError(f"the snapshot has format {header['format']}, newer than this colcep reads ({FORMAT}); "
                            "upgrade colcep to restore it")
    return header, _Reader(header["blobs"], memoryview(body)[start + n:])


_BUFFER_FAULTS = {kcompact.BUF_PARENT: "a parent outside the buffer", kcompact.BUF_STAGE: "a stage this pattern does "
                  "not have", kcompact.BUF_JOIN: "a JOIN side outside the buffer", kcompact.BUF_ROW: "an event row "
                  "outside the rows fed", kcompact.BUF_ROOT: "a run or held match pointing outside the buffer",
                  kcompact.BUF_REF: "a reference count that is not the number of nodes, runs and held matches "
                  "pointing at it", kcompact.BUF_CYCLE: "a cycle of parents (a node its own ancestor)"}


def _check_counters(st: MatcherState) -> None:
    """The header's counters are counts, and its times times."""
    counters = (st.rows_seen, st.rows_fed, st.matches_out, st.late_rows)
    if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**62 for x in counters) \
            or st.rows_fed > st.rows_seen:
        raise SnapshotError(f"the snapshot's counters are inconsistent (rows seen, fed, matches, late rows: "
                            f"{counters!r})")
    for name in ("watermark", "max_ts", "ticked"):
        x = getattr(st, name)
        if x is not None and (not isinstance(x, int) or isinstance(x, bool) or not -2**63 <= x < 2**63):
            raise SnapshotError(f"the snapshot's {name} is not a time: {x!r}")


def _check_indices(st: MatcherState, program: "CompiledPattern", retains: bool) -> None:
    """Everything the kernels will index or count on, checked before any of them runs: snapshot
    bytes cross a trust boundary (the digest catches accidents, not intent), and the kernels
    index without bounds checks. Vectorised (the buffer's check is one linear kernel); a fault
    raises ``SnapshotError`` naming the section and the first bad index."""
    fed, n_keys = st.rows_fed, st.keys.n
    for what, x in (("runs", st.runs), ("held matches", st.held)):
        key = np.repeat(np.arange(n_keys), np.diff(x.ptr))
        bad = np.flatnonzero((x.start_pos < 0) | (x.start_pos >= fed) | (x.start_ts > st.key_last_ts[key]))
        if bad.size:
            raise SnapshotError(f"the snapshot's {what} section has a start (row, time) the key never had, at "
                                f"index {int(bad[0])}")
    h = st.held
    first = np.zeros(h.start_pos.shape[0], bool)
    first[h.ptr[:-1][np.diff(h.ptr) > 0]] = True  # each key's first held match
    bad = np.flatnonzero((h.end_pos < h.start_pos) | (h.end_pos >= fed)
                         | (~first & (h.start_pos < np.roll(h.start_pos, 1))))  # released oldest start first
    if bad.size:
        raise SnapshotError(f"the snapshot's held matches section has an end row outside its match or a match "
                            f"out of start order, at index {int(bad[0])}")
    b = st.buffer
    n = int(b.meta[0])
    roots = np.concatenate([st.runs.node, st.held.node]).astype(np.int64)
    code, i = kcompact.check_buffer(b.row[:n], b.stage[:n], b.parent[:n], b.ref[:n], roots,
                                    len(program.stage_names), fed)
    if code != kcompact.BUF_OK:
        raise SnapshotError(f"the snapshot's buffer section has {_BUFFER_FAULTS[int(code)]}, at index {int(i)}")
    ids = st.retained[0][0] if st.retained else np.zeros(0, np.int64)
    if ids.size and ((np.diff(ids) <= 0).any() or ids[0] < 0 or ids[-1] >= fed):
        raise SnapshotError("the snapshot's retained rows are not distinct rows fed, in order")
    if retains:  # the output's columns come from the retained rows: every event of a live node is one
        events = np.flatnonzero(b.stage[:n] != JOIN)
        rows = b.row[events]
        at = np.minimum(np.searchsorted(ids, rows), ids.size - 1)
        miss = np.flatnonzero(ids[at] != rows) if ids.size else np.arange(rows.size)
        if miss.size:
            raise SnapshotError(f"the snapshot's buffer section refers to an input row it does not hold, at "
                                f"index {int(events[miss[0]])}")


def _check_consistent(st: MatcherState, program: "CompiledPattern") -> None:
    """Cheap structural checks, so that a hand-edited or mismatched snapshot fails here."""
    n_keys = st.keys.n
    n_nodes = int(st.buffer.meta[0])
    for what, x in (("runs", st.runs), ("held matches", st.held)):
        if x.ptr.shape[0] != n_keys + 1 or x.ptr[0] != 0 or x.ptr[-1] != x.node.shape[0] or (np.diff(x.ptr) < 0).any():
            raise SnapshotError(f"the snapshot's {what} do not fit its {n_keys} keys")
        if x.node.shape[0] and (x.node.min() < -1 or x.node.max() >= n_nodes):
            raise SnapshotError(f"the snapshot's {what} point outside its match buffer")
    if st.runs.state.shape[0] and (st.runs.state.max() >= program.nfa.n_states or st.runs.state.min() < 0):
        raise SnapshotError("the snapshot's runs are in states this pattern does not have")
    if st.runs.v.ndim != 2 or st.runs.v.shape[1] != program.v_width:
        raise SnapshotError("the snapshot's aggregate vectors do not fit this pattern")
    if st.start_dead.shape[0] != n_keys or st.key_last_ts.shape[0] != n_keys:
        raise SnapshotError(f"the snapshot's per-key arrays do not fit its {n_keys} keys")
    if st.history is not None:
        from colcep.engine.history import plan
        p = plan(program.lowered.hist_exprs)
        bad = "this pattern reads no history" if p is None else st.history.check(n_keys, p.n_sources, st.rows_fed)
        if bad:
            raise SnapshotError(f"the snapshot does not fit: {bad}")
