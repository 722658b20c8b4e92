"""Window assignment and windowed aggregation (colcep.windows) next to pyarrow's and pandas'
own grouping / resampling, on the same synthetic ticks (``colcep.tools.ticks.make_ticks``, the
algorithm of shared/bench/gen_ticks.py: 10^6 ticks, 100 symbols, about 2 ms apart).

Run against the installed package: ``asv run --python=same --bench bench_windows``.
"""
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from colcep.tools.ticks import make_ticks
from colcep.windows import Count, Session, Sliding, Tumbling, aggregate, assign, ohlc

EVENTS, SYMBOLS, SEED = 1_000_000, 100, 7
MINUTE = 60_000


def _data():
    ticks = make_ticks(EVENTS, SYMBOLS, SEED)  # id, name, ts (int64 ms), price, volume
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


TRIGGERS = {
    "none": {},
    "event_time": {"trigger": "EventTime"},
    "continuous_10s": {"trigger": "ContinuousEventTime"},
    "purging_count_100_or_end": {"trigger": "PurgingCountOrEnd"},
    "count_evictor_50": {"evictor": "CountEvictor"},
}


def _firing_args(name: str) -> dict:
    from colcep import triggers as tr

    made = {"EventTime": tr.EventTime(), "ContinuousEventTime": tr.ContinuousEventTime(10_000),
            "PurgingCountOrEnd": tr.Purging(tr.Count(100) | tr.EventTime()), "CountEvictor": tr.CountEvictor(50)}
    return {k: made[v] for k, v in TRIGGERS[name].items()}


class Triggers:
    """1-minute bars (ohlc) fired by trigger, next to the plain bars ("none": one per window over
    the rows sorted by key and time; the others step the rows in arrival order, per-row watermark)."""

    timeout = 300
    params = list(TRIGGERS)
    param_names = ["trigger"]

    def setup_cache(self):
        return _data()

    def setup(self, data, trigger):
        ohlc(data[0].slice(0, 1000), Tumbling(MINUTE), key="name", **_firing_args(trigger))

    def time_ohlc(self, data, trigger):
        ohlc(data[0], Tumbling(MINUTE), key="name", **_firing_args(trigger))

    def peakmem_ohlc(self, data, trigger):
        ohlc(data[0], Tumbling(MINUTE), key="name", **_firing_args(trigger))

    def track_firings(self, data, trigger):
        return ohlc(data[0], Tumbling(MINUTE), key="name", **_firing_args(trigger)).num_rows

    track_firings.unit = "bars"
