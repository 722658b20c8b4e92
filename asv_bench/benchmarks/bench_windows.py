"""Window assignment and windowed aggregation (colcep.windows) next to pyarrow's and pandas'
own grouping / resampling, on the same synthetic ticks (shared/bench/gen_ticks.py's
distribution: 10^6 ticks, 100 symbols, about 2 ms apart).

Run against the installed package: ``asv run --python=same --bench bench_windows``.
"""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from colcep.windows import Count, Session, Sliding, Tumbling, aggregate, assign, ohlc

EVENTS, SYMBOLS, SEED = 1_000_000, 100, 7
MINUTE = 60_000


def make_ticks(events: int, symbols: int, seed: int) -> pa.Table:
    """gen_ticks.py's generator: id, name, ts (int64 ms), price, volume."""
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, size=events)
    ts = np.cumsum(rng.exponential(2.0, size=events)).astype(np.int64)
    steps = rng.normal(0.0, 0.0005, size=events)
    order = np.argsort(sym, kind="stable")
    c = np.cumsum(steps[order])
    starts = np.r_[0, np.flatnonzero(np.diff(sym[order])) + 1]
    ret = np.empty(events)
    ret[order] = c - np.repeat(c[starts] - steps[order][starts], np.diff(np.r_[starts, events]))
    price = np.round((20.0 + 180.0 * rng.random(symbols))[sym] * np.exp(ret), 4)
    volume = np.round(rng.lognormal(np.log(300.0), 0.8, size=events))
    names = np.array([f"S{i:04d}" for i in range(symbols)], dtype=object)[sym]
    return pa.table({"id": np.arange(events, dtype=np.int64), "name": names, "ts": ts, "price": price,
                     "volume": volume})


def _data():
    ticks = make_ticks(EVENTS, SYMBOLS, SEED)
    frame = ticks.to_pandas()
    frame["dt"] = pd.to_datetime(frame["ts"], unit="ms")
    return ticks, frame


def _arrow_ohlc(ticks: pa.Table) -> pa.Table:
    t = ticks.append_column("window_start", pc.multiply(pc.divide(ticks["ts"], MINUTE), MINUTE))  # ts >= 0
    return t.group_by(["name", "window_start"], use_threads=False).aggregate(
        [("price", "first"), ("price", "max"), ("price", "min"), ("price", "last"), ("volume", "sum"),
         ("price", "count")])


def _pandas_ohlc(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby(["name", pd.Grouper(key="dt", freq="1min")]).agg(
        open=("price", "first"), high=("price", "max"), low=("price", "min"), close=("price", "last"),
        volume=("volume", "sum"), count=("price", "size"))


WINDOWS = {
    "tumbling_1min": Tumbling(MINUTE),
    "sliding_5min_1min": Sliding(5 * MINUTE, MINUTE),
    "session_50ms": Session(50),
    "count_100": Count(100),
}


class OHLC:
    """1-minute bars per symbol: open high low close, volume sum, tick count."""

    timeout = 300

    def setup_cache(self):
        return _data()

    def setup(self, data):
        ticks, _ = data
        ohlc(ticks.slice(0, 1000), Tumbling(MINUTE), key="name")  # warm the JIT / load its cache

    def time_colcep(self, data):
        ohlc(data[0], Tumbling(MINUTE), key="name")

    def time_pyarrow_group_by(self, data):
        _arrow_ohlc(data[0])

    def time_pandas_resample(self, data):
        _pandas_ohlc(data[1])

    def peakmem_colcep(self, data):
        ohlc(data[0], Tumbling(MINUTE), key="name")

    def peakmem_pyarrow_group_by(self, data):
        _arrow_ohlc(data[0])

    def peakmem_pandas_resample(self, data):
        _pandas_ohlc(data[1])


class AssignTumbling:
    """Tag every tick with its 1-minute window start (a column transform)."""

    timeout = 300

    def setup_cache(self):
        return _data()

    def setup(self, data):
        assign(data[0].slice(0, 1000), Tumbling(MINUTE), key="name")

    def time_colcep(self, data):
        assign(data[0], Tumbling(MINUTE), key="name")

    def time_pyarrow_compute(self, data):
        pc.multiply(pc.divide(data[0]["ts"], MINUTE), MINUTE)

    def time_pandas_floor(self, data):
        data[1]["dt"].dt.floor("1min")

    def peakmem_colcep(self, data):
        assign(data[0], Tumbling(MINUTE), key="name")


class WindowKinds:
    """colcep aggregate (count, sum, min, max, first, last, mean of price) and assign per window kind."""

    timeout = 300
    params = list(WINDOWS)
    param_names = ["window"]
    AGGS = {"n": "count", "sum": ("price", "sum"), "lo": ("price", "min"), "hi": ("price", "max"),
            "open": ("price", "first"), "close": ("price", "last"), "mean": ("price", "mean")}

    def setup_cache(self):
        return _data()

    def setup(self, data, window):
        aggregate(data[0].slice(0, 1000), WINDOWS[window], self.AGGS, key="name")
        assign(data[0].slice(0, 1000), WINDOWS[window], key="name")

    def time_aggregate(self, data, window):
        aggregate(data[0], WINDOWS[window], self.AGGS, key="name")

    def time_assign(self, data, window):
        assign(data[0], WINDOWS[window], key="name")

    def peakmem_aggregate(self, data, window):
        aggregate(data[0], WINDOWS[window], self.AGGS, key="name")

    def track_windows(self, data, window):
        return aggregate(data[0], WINDOWS[window], {"n": "count"}, key="name").num_rows

    track_windows.unit = "windows"
