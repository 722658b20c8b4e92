"""Coding a batch's key column (``colcep.engine.keys.KeyCodes``), one thread.

``index``: through the hash table kept across batches (``colcep.engine.keyindex``), as a
Matcher codes a string key; ``arrow``: Arrow's dictionary encoding of the batch and the mapping
of its dictionary to the codes (the way before, still taken by composite keys and other types).
The keys are all known (a stream in steady state); ``track_index_over_arrow``: the CPU ratio.
"""
import time

import numpy as np
import pyarrow as pa

from colcep.engine.keys import KeyCodes
from colcep.tools.ticks import make_ticks

from .common import QUICK

REPEAT = 5 if QUICK else 50


def _arrow(kc: KeyCodes, tbl: pa.Table) -> np.ndarray:
    local, values = kc.local(tbl)
    return kc._mapping(values)[local]


def _cpu(fn, kc: KeyCodes, batches: list[pa.Table]) -> float:
    t0 = time.process_time()
    for b in batches:
        fn(kc, b)
    return time.process_time() - t0


class KeyCoding:
    params = ([1_000, 1_000_000], [100, 5_000])
    param_names = ["batch_rows", "symbols"]
    number = 1
    repeat = (1, 3, 30.0)
    rounds = 1
    warmup_time = 0.0

    def setup(self, batch_rows, symbols):
        rows = min(batch_rows, 10_000) if QUICK else batch_rows
        ticks = make_ticks(max(rows, 20 * symbols), symbols, 7)
        self.kc = KeyCodes("name")
        self.kc.encode(ticks)  # every key known
        self.batches = [ticks.slice(0, rows)] * REPEAT
        assert np.array_equal(self.kc.encode(self.batches[0]), _arrow(self.kc, self.batches[0]))

    def time_index(self, batch_rows, symbols):
        _cpu(KeyCodes.encode, self.kc, self.batches)

    def time_arrow(self, batch_rows, symbols):
        _cpu(_arrow, self.kc, self.batches)

    def track_index_over_arrow(self, batch_rows, symbols):
        return _cpu(KeyCodes.encode, self.kc, self.batches) / _cpu(_arrow, self.kc, self.batches)
