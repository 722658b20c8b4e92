"""Dense codes for the values of the key columns, stable across batches.

``key=`` is a column name, a sequence of names (a composite key: its values are tuples, one
item per column) or None (one stream). A sequence of one name is that name. A key of one
column of strings, binary or integers is coded through a hash table kept across batches
(``colcep.engine.keyindex``), in one pass over the column's buffers. Other keys are coded
column-at-a-time: each key column is dictionary-encoded and the code arrays are combined (and
made dense again) with Arrow's hash encoding. Either way Python touches only the new keys.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colcep.engine.keyindex import KeyIndex, kind_of
from colcep.errors import InputError
from colcep.kernels import arrays as karr


def key_names(key: Any, time: str | None = None) -> list[str]:
    """The key columns of ``key=`` (None, a name or a sequence of names), checked: names are
    strings, none twice, none the time column ``time``."""
    if key is None:
        return []
    if isinstance(key, str):
        names = [key]
    else:
        try:
            names = list(key)
        except TypeError:
            raise InputError(f"key= takes a column name or a sequence of names, got {type(key).__name__}") from None
        if not names:
            raise InputError("key= got an empty sequence of columns; pass key=None for one stream")
    for n in names:
        if not isinstance(n, str):
            raise InputError(f"key= takes column names (strings), got {n!r} in {names}")
    dup = [n for n in names if names.count(n) > 1]
    if dup:
        raise InputError(f"key column {dup[0]!r} appears twice in key={names}")
    if time is not None and time in names:
        raise InputError(f"key column {time!r} is also the time column; a key partitions the stream, the time "
                         "orders it: pick another key column")
    return names


def normalize_key(key: Any, time: str | None = None) -> "str | list[str] | None":
    """``key=`` as colcep keeps it: None, one name, or a list of two or more names."""
    names = key_names(key, time)
    return None if not names else names[0] if len(names) == 1 else names


class KeyCodes:
    """Key values to dense integer codes, kept across batches (first-seen order). ``name``: one
    column, a list of columns (values are tuples) or None (every row gets code 0)."""

    def __init__(self, name: "str | Sequence[str] | None"):
        self.names = key_names(name)
        self.name = None if not self.names else self.names[0] if len(self.names) == 1 else list(self.names)
        self.composite = len(self.names) > 1
        self.codes: dict = {}
        self.values: list = []
        self.types: list[pa.DataType | None] = [None] * len(self.names)
        self._arrs: list[pa.Array] | None = None
        # one dictionary column: its last dictionary and each entry's code (-1: not coded yet),
        # so that batches sharing a dictionary (a Parquet file's) are coded by one gather
        self._by_dictionary: tuple[pa.Array, np.ndarray] | None = None
        # one column of strings, binary or integers: the codes through a hash table (its kind's),
        # for the list ``values`` it indexes; False once the values are not all of one kind
        self._index: KeyIndex | None | bool = None
        self._indexed: list | None = None

    def mark(self) -> tuple:
        """What ``rollback`` goes back to (codes only grow: their number, and the types)."""
        return len(self.values), self.types

    def rollback(self, mark: tuple) -> None:
        """Forget the keys coded since ``mark()``."""
        n, types = mark
        for v in self.values[n:]:
            del self.codes[v]
        if len(self.values) > n:
            del self.values[n:]
            self._arrs = self._by_dictionary = None
            if isinstance(self._index, KeyIndex):
                self._index.truncate(n)
        self.types = types

    def copy(self) -> "KeyCodes":
        k = KeyCodes(self.name)
        k.codes, k.values, k.types = dict(self.codes), list(self.values), list(self.types)
        return k

    def check_nulls(self, tbl: pa.Table, row0: int = 0) -> None:
        for name in self.names:
            col = tbl.column(name)
            if col.null_count:
                row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise InputError(f"key column {name!r} has a null at row {row0 + row}")

    def local(self, tbl: pa.Table) -> tuple[np.ndarray, list]:
        """The batch's own dense codes (first-seen order) and the key value of each code."""
        if not self.composite:
            col = tbl.column(self.names[0])
            enc = dictionary_encoded(col)
            idx = enc.indices.to_numpy(zero_copy_only=False)
            if not pa.types.is_dictionary(col.type):
                return idx, enc.dictionary.to_pylist()  # Arrow numbered them in first-seen order
            # a dictionary column as given (e.g. read from Parquet) lists its values in its own order,
            # some perhaps not in this batch: the batch's keys in first-seen order, as for any column
            rank, seen = karr.first_seen(np.array(idx, np.int64), len(enc.dictionary))  # (a copy: one signature)
            return rank[idx], enc.dictionary.take(pa.array(seen)).to_pylist()
        codes = None
        for name in self.names:
            enc = dictionary_encoded(tbl.column(name))
            idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            if codes is None:
                codes = idx
            else:  # pairs (codes so far, this column's code) -> dense codes again, first-seen order
                both = pc.dictionary_encode(pa.array(codes * len(enc.dictionary) + idx))
                codes = both.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        # codes are dense in first-seen order: a row holds a new code where it passes all before it
        new = np.empty(codes.shape[0], bool)
        new[0] = True
        new[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
        first = pa.array(np.flatnonzero(new))
        values = list(zip(*(tbl.column(name).take(first).to_pylist() for name in self.names)))
        return codes, values

    def encode(self, tbl: pa.Table, row0: int = 0, slices: int = 1,
               run_all: "Callable[[list], list] | None" = None) -> np.ndarray:
        """The key codes of ``tbl``'s rows; new keys get the next codes in first-seen order.
        With ``run_all`` (runs a list of functions at once on threads) one key column that is
        not dictionary-encoded is encoded in ``slices`` parts at once."""
        if not self.names:
            if not self.values:
                self.codes[None] = 0
                self.values.append(None)
            return np.zeros(tbl.num_rows, np.int64)
        if self.types[0] is None:
            self.types = [tbl.schema.field(n).type for n in self.names]
        self.check_nulls(tbl, row0)
        if tbl.num_rows == 0:
            return np.zeros(0, np.int64)
        col = tbl.column(self.names[0])
        index = self._index_of(col.type)
        if index is not None:
            codes, first = index.encode_chunks(col.chunks, slices, run_all)
            if first is not None:  # the new keys' values, from the rows where each was first seen
                self._learn(col.take(first).to_pylist(), index)
            return codes
        if slices > 1 and run_all is not None and not self.composite and not pa.types.is_dictionary(col.type):
            # each slice's dictionary lists its values in first-seen order, so taking the slices'
            # dictionaries in order numbers the keys as one pass over the column does
            n = tbl.num_rows
            bounds = [n * i // slices for i in range(slices + 1)]
            parts = run_all([partial(_dictionary, col.slice(a, b - a)) for a, b in zip(bounds, bounds[1:])])
            out = np.empty(n, np.int64)
            run_all([partial(np.take, self._mapping(values), idx, out=out[a:b])
                     for (idx, values), a, b in zip(parts, bounds, bounds[1:])])
            return out
        enc = dictionary_encoded(col) if not self.composite and pa.types.is_dictionary(col.type) else None
        if enc is not None:
            codes = self._known_codes(enc)
            if codes is not None:
                return codes
        local, values = self.local(tbl)
        codes = self._mapping(values)[local]
        if enc is not None:  # each entry's code, for the next batch with this dictionary
            self._by_dictionary = (enc.dictionary, self._entry_codes(enc.dictionary))
        return codes

    def _index_of(self, t: pa.DataType) -> KeyIndex | None:
        """The hash table coding one key column of type ``t``, holding every key coded so far;
        None where it does not serve (composite keys, other types, values of mixed kinds)."""
        kind = None if self.composite or self._index is False else kind_of(t)
        if kind is None:
            return None
        index = self._index
        if not isinstance(index, KeyIndex) or self._indexed is not self.values:
            index, self._indexed = KeyIndex(kind), self.values
        if index.kind != kind:
            return None  # (another kind of column than the index's: Arrow codes it)
        try:
            if len(self.values) > index.n:  # keys coded without the table (or before it)
                index.add(self.values[index.n:])
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            self._index = False  # values of several kinds: Arrow codes every batch from now on
            return None
        self._index = index
        return index

    def _learn(self, values: list, index: KeyIndex) -> None:
        """The new keys ``values`` (numbered on, as the index numbered them)."""
        for v in values:
            self.codes[v] = len(self.values)
            self.values.append(v)
        self._arrs = None
        if index.n != len(self.values):
            raise RuntimeError("colcep: the key index and the key values disagree")  # (a bug of ours)

    def _known_codes(self, enc: pa.DictionaryArray) -> np.ndarray | None:
        """The codes of a dictionary column's rows when every row's key is coded already (each
        entry of its dictionary looked up, once for the batches that share it: a Parquet row
        group's; then one gather), else None."""
        known = self._by_dictionary
        if known is None or not known[0].equals(enc.dictionary):
            known = self._by_dictionary = (enc.dictionary, self._entry_codes(enc.dictionary))
        codes = known[1][enc.indices.to_numpy(zero_copy_only=False)]
        return codes if codes.shape[0] == 0 or codes.min() >= 0 else None

    def _entry_codes(self, d: pa.Array) -> np.ndarray:
        """The code of each entry of a dictionary ``d`` (-1: a key not coded yet), through the
        index where it serves (a Parquet file's row groups each bring a dictionary of every key)."""
        index = self._index_of(d.type) if d.null_count == 0 else None
        if index is not None:
            return index.look_up(d)
        return np.array([self.codes.get(v, -1) for v in d.to_pylist()], np.int64)

    def _mapping(self, values: list) -> np.ndarray:
        """The codes of the key ``values`` (distinct), new ones numbered on in their order."""
        codes = self.codes
        mapping = [codes.get(v, -1) for v in values]
        if -1 in mapping:
            for i, v in enumerate(values):
                if mapping[i] < 0:
                    mapping[i] = codes[v] = len(self.values)
                    self.values.append(v)
            self._arrs = None
        return np.array(mapping, np.int64)

    @property
    def n(self) -> int:
        return len(self.values)

    def arrays(self, codes: np.ndarray) -> list[pa.Array]:
        """The values of keys ``codes``, one array per key column, of its type (one dictionary
        column: the codes over the keys seen so far, no value copied)."""
        values = self._values()
        t = self.types[0] if self.types else None
        if not self.composite and t is not None and pa.types.is_dictionary(t) and \
                len(self.values) <= np.iinfo(t.index_type.to_pandas_dtype()).max:
            return [pa.DictionaryArray.from_arrays(pa.array(codes, t.index_type), values[0], ordered=t.ordered)]
        idx = pa.array(codes, pa.int64())
        return [a.take(idx).cast(t) if t is not None and pa.types.is_dictionary(t) else a.take(idx)
                for a, t in zip(values, self.types)]

    def take(self, codes: np.ndarray) -> pa.Array:
        """The values of keys ``codes`` (one key column; a dictionary column's values)."""
        return self._values()[0].take(pa.array(codes, pa.int64()))

    def _values(self) -> list[pa.Array]:
        """Per key column, the values of all keys seen (in code order), of its value type."""
        if self._arrs is None:
            cols = list(zip(*self.values)) if self.composite else [self.values]
            if not cols:
                cols = [[] for _ in self.names]
            self._arrs = [pa.array(list(c), t.value_type if pa.types.is_dictionary(t) else t)
                          for c, t in zip(cols, self.types)]
        return self._arrs

    def as_value(self, k: Any) -> Any:
        """A key value as given by a caller (``keys=``): a tuple for a composite key."""
        if not self.composite:
            return k
        if not isinstance(k, (tuple, list)) or len(k) != len(self.names):
            raise InputError(f"the key is composite ({', '.join(self.names)}): give each key as a tuple of "
                             f"{len(self.names)} values, got {k!r}")
        return tuple(k)


def dictionary_encoded(col: "pa.ChunkedArray | pa.Array") -> pa.DictionaryArray:
    """The column dictionary-encoded in one array. (A column of values is encoded chunk by
    chunk, one dictionary for all, and only its indices are joined: joining the values
    first would copy them.)"""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            col = col.chunk(0)
        elif not pa.types.is_dictionary(col.type):
            return pc.dictionary_encode(col).combine_chunks()
        else:
            col = col.combine_chunks()
    return col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)


def _dictionary(col: "pa.ChunkedArray | pa.Array") -> tuple[np.ndarray, list]:
    """A column's index per row into its distinct values, and those values (first-seen order)."""
    enc = dictionary_encoded(col)
    return enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()
