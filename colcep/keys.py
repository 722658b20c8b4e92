"""Dense codes for the values of a key column, stable across batches."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InputError


class KeyCodes:
    """Key values to dense integer codes, kept across batches (first-seen order); ``None``
    as the column name means one stream (every row gets code 0)."""

    def __init__(self, name: str | None):
        self.name = name
        self.codes: dict = {}
        self.values: list = []
        self.type: pa.DataType | None = None
        self._arr: pa.Array | None = None

    def check_nulls(self, tbl: pa.Table, row0: int = 0) -> None:
        col = tbl.column(self.name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"key column {self.name!r} has a null at row {row0 + row}")

    def encode(self, tbl: pa.Table, row0: int = 0) -> np.ndarray:
        if self.name is None:
            if not self.values:
                self.codes[None] = 0
                self.values.append(None)
            return np.zeros(tbl.num_rows, np.int64)
        col = tbl.column(self.name)
        if self.type is None:
            self.type = col.type
        self.check_nulls(tbl, row0)
        if tbl.num_rows == 0:
            return np.zeros(0, np.int64)
        enc = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if not pa.types.is_dictionary(enc.type):
            enc = pc.dictionary_encode(enc)
        mapping = np.empty(len(enc.dictionary), np.int64)
        for i, v in enumerate(enc.dictionary.to_pylist()):
            code = self.codes.get(v)
            if code is None:
                code = self.codes[v] = len(self.values)
                self.values.append(v)
                self._arr = None
            mapping[i] = code
        return mapping[enc.indices.to_numpy(zero_copy_only=False)]

    @property
    def n(self) -> int:
        return len(self.values)

    def take(self, codes: np.ndarray) -> pa.Array:
        if self._arr is None:
            t = self.type.value_type if pa.types.is_dictionary(self.type) else self.type
            self._arr = pa.array(self.values, t)
        return self._arr.take(pa.array(codes, pa.int64()))
