"""Window-trigger cases (``tests/data/window_triggers.json``, outputs from Flink 2.3's DataStream
API via ``tests/flink_windows``) read into colcep's specifications, and colcep's firings in the
corpus' form, to compare with Flink's."""
from __future__ import annotations

import json
import pathlib
from typing import Iterable

import numpy as np
import pyarrow as pa

from colcep import triggers as tr
from colcep.windows import Global, Session, Sliding, Tumbling, WindowAggregator

CORPUS = pathlib.Path(__file__).parent / "data" / "window_triggers.json"
KINDS = ("early", "on_time", "late")


def load() -> list[dict]:
    return json.loads(CORPUS.read_text())["cases"]


def _ms(x: int, ms: bool):
    """A duration of the corpus (ms): the int itself (a time column in ms), or ``"<x>ms"``."""
    return f"{x}ms" if ms else x


def window(w: dict, ms: bool = False):
    if w["kind"] == "tumbling":
        return Tumbling(_ms(w["size"], ms), _ms(w.get("offset", 0), ms))
    if w["kind"] == "sliding":
        return Sliding(_ms(w["size"], ms), _ms(w["slide"], ms), _ms(w.get("offset", 0), ms))
    if w["kind"] == "session":
        return Session(_ms(w["gap"], ms))
    return Global()


def trigger(t: dict | None, ms: bool = False):
    if t is None:
        return None
    k = t["kind"]
    if k == "event_time":
        return tr.EventTime()
    if k == "count":
        return tr.Count(t["n"])
    if k == "continuous":
        return tr.ContinuousEventTime(_ms(t["interval"], ms))
    if k == "delta":
        return tr.Delta(t["threshold"], "v")
    if k == "purging":
        return tr.Purging(trigger(t["of"], ms))
    return tr.AnyOf(*(trigger(x, ms) for x in t["of"]))


def evictor(e: dict | None, ms: bool = False):
    if e is None:
        return None
    if e["kind"] == "count":
        return tr.CountEvictor(e["n"], e["after"])
    if e["kind"] == "time":
        return tr.TimeEvictor(_ms(e["size"], ms), e["after"])
    return tr.DeltaEvictor(e["threshold"], "v", e["after"])


def table(case: dict, rows: Iterable[int] | None = None) -> pa.Table:
    idx = range(len(case["rows"])) if rows is None else list(rows)
    return pa.table({"k": pa.array([case["rows"][i][0] for i in idx], pa.string()),
                     "ts": pa.array([case["rows"][i][1] for i in idx], pa.int64()),
                     "v": pa.array([float(case["rows"][i][2]) for i in idx], pa.float64()),
                     "idx": pa.array(list(idx), pa.int64())})


def aggregator(case: dict, watermarks: str = "row") -> WindowAggregator:
    lateness = case.get("lateness", 0)
    return WindowAggregator(window(case["window"]), {"n": "count"}, key="k", out_of_orderness=case.get("bound", 0),
                            trigger=trigger(case["trigger"]), evictor=evictor(case["evictor"]),
                            allowed_lateness=lateness, watermarks=watermarks)


def firings(case: dict, batches: list[list[int]], watermarks: str = "row") -> dict:
    """colcep's firings of the case fed in ``batches`` (row indices), in the corpus' form:
    ``{"firings": sorted [key, start, end, seq, kind, rows in received order], "late": [...]}``."""
    agg = aggregator(case, watermarks)
    out: list = []
    late: list[int] = []
    captured: list = []
    for b in batches:
        agg.process(table(case, b))
        captured.append(agg._last_fired)
        lt = agg.pop_late()
        if lt is not None:
            late.extend(lt.column("idx").to_pylist())
    agg.close()
    captured.append(agg._last_fired)
    keys = agg._keys
    for fired in captured:
        idx = fired.rows.column("idx").to_numpy()
        for f in range(fired.key.shape[0]):
            glob = case["window"]["kind"] == "global"
            out.append([keys.take(fired.key[f:f + 1])[0].as_py(), None if glob else int(fired.start[f]),
                        None if glob else int(fired.end[f]), int(fired.seq[f]), KINDS[int(fired.kind[f])],
                        [int(x) for x in idx[fired.received[fired.lo[f]:fired.hi[f]]]]])
    return {"firings": sorted(out, key=_order), "late": late}


def _order(f: list) -> tuple:
    return (f[0], -2**63 if f[1] is None else f[1], -2**63 if f[2] is None else f[2], f[3])


def flink_firings(case: dict) -> dict:
    exp = case["expected"]
    fs = [[f[0], f[1], f[2], f[3], f[4], list(f[6])] for f in exp["firings"]]
    return {"firings": sorted(fs, key=_order), "late": list(exp["late"])}


def random_batches(n: int, rng: np.random.Generator) -> list[list[int]]:
    cuts = sorted(set(rng.integers(0, n + 1, size=rng.integers(0, 4)).tolist()) | {0, n})
    return [list(range(a, b)) for a, b in zip(cuts, cuts[1:])]
