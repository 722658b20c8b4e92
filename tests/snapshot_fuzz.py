"""Mutated snapshots, restored and run (issue 25): the cases and mutations of
``tests/test_snapshot_fuzz.py``, and its child process (``python snapshot_fuzz.py CASE SEED N``):
for each of N mutations of case CASE's snapshot it prints the mutation, then the outcome
(``ok``, ``SnapshotError`` or another colcep error's name), so that a crash or a hang names the
mutation it died on."""
from __future__ import annotations

import hashlib
import json
import struct
import sys

import numpy as np
import pyarrow as pa

import colcep as cc
from colcep import col, first, last
from colcep.engine import codec
from colcep.errors import ColcepError, SnapshotError
from colcep.skip import SkipPastLastEvent
from colcep.tools.ticks import make_ticks

N_ROWS = 3_000
SPLIT = 1_800


def _table(composite: bool = False) -> pa.Table:
    t = make_ticks(N_ROWS, 3, 5)
    if composite:
        t = t.append_column("venue", pa.array(np.where(np.arange(N_ROWS) % 3 == 0, "X", "Y")))
    return t


def cases() -> dict:
    """name -> (pattern, Matcher keyword arguments, composite keys): windows, time-outs, merging,
    parked runs, history, composite keys, event time."""
    a = cc.Pattern.begin("a").where(col("volume") > 300.0)
    return {
        "timeouts": (a.followed_by("b").where(col("price") > last("price", of="a") * 1.001).one_or_more()
                     .followed_by("c").where(col("price") < last("price", of="b")).within(800)
                     .skip(SkipPastLastEvent()), {"timeouts": True}, False),
        "merging": (a.followed_by_any("b").where(col("price") > first("price", of="a")).one_or_more()
                    .followed_by("c").where(col("price") < first("price", of="a") * 0.999).within(300), {}, False),
        "parked": (a.followed_by("b").where(col("price") > last("price", of="a") * 1.01).within(2000), {}, False),
        "history": (cc.Pattern.begin("a").where(col("price") > cc.prev("price"))
                    .followed_by("b").where(col("volume") > cc.rolling("volume", "mean", rows=5)).within(500),
                    {}, False),
        "composite": (a.followed_by("b").where(col("price") > last("price", of="a")).within(400),
                      {"key": ["name", "venue"]}, True),
        "event_time": (a.followed_by("b").where(col("price") > last("price", of="a")).within(400),
                       {"out_of_orderness": 50}, False),
    }


def snapshot(case: str) -> tuple[bytes, pa.Table]:
    """The case's snapshot after SPLIT rows, and the rows after it."""
    p, kw, composite = cases()[case]
    t = _table(composite)
    kw = {"key": "name", **kw}
    m = cc.Matcher(p, time="ts", **kw)
    m.process(t.slice(0, SPLIT))
    return m.snapshot(), t.slice(SPLIT)


def _split(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack_from("<I", data, len(codec.MAGIC))
    start = len(codec.MAGIC) + 4
    return json.loads(data[start:start + n]), data[start + n:-32]


def _join(header: dict, blobs: bytes) -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    body = codec.MAGIC + struct.pack("<I", len(head)) + head + blobs
    return body + hashlib.sha256(body).digest()


EXTREMES = [-1, -2, -5, 1, 10**9, 2**31 - 1, 2**31, 2**62, 2**63 - 1, -2**63]


def mutate(data: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    """One mutation: a value of a numeric section (random, extreme, off by one, swapped with
    another), a section's bytes cut short, or a counter of the header; the digest recomputed."""
    header, blobs = _split(data)
    arrays = [k for k, e in header["blobs"].items() if "dtype" in e and e["length"] > 0]
    kind = rng.choice(["value", "extreme", "off_by_one", "swap", "truncate", "counter"], p=[.2, .3, .2, .1, .1, .1])
    if kind == "counter" or not arrays:
        name = str(rng.choice(sorted(header["counters"])))
        v = int(rng.choice(EXTREMES))
        header["counters"][name] = v if rng.random() < 0.7 else (header["counters"][name] or 0) + int(rng.integers(-2, 3))
        return f"counter {name}={header['counters'][name]}", _join(header, blobs)
    name = str(rng.choice(arrays))
    e = header["blobs"][name]
    if kind == "truncate":
        e["length"] = int(rng.integers(0, e["length"]))
        return f"truncate {name} to {e['length']} bytes", _join(header, blobs)
    dt = np.dtype(e["dtype"]).newbyteorder("<")
    a = np.frombuffer(blobs[e["offset"]:e["offset"] + e["length"]], dtype=dt).copy()
    i = int(rng.integers(0, a.size))
    if kind == "swap" and a.size > 1:
        j = int(rng.integers(0, a.size))
        a[i], a[j] = a[j], a[i]
        what = f"swap {name}[{i}] and [{j}]"
    else:
        if dt.kind == "f":
            v = {"value": rng.normal() * 1e3, "extreme": float(rng.choice([np.nan, np.inf, -np.inf, 1e308, -0.0])),
                 "off_by_one": float(a[i]) + float(rng.choice([-1, 1]))}.get(str(kind), 0.0)
        else:
            info = np.iinfo(dt)
            v = {"value": int(rng.integers(-100, 10**4)), "extreme": int(rng.choice(EXTREMES)),
                 "off_by_one": int(a[i]) + int(rng.choice([-1, 1]))}.get(str(kind), 0)
            v = int(np.clip(v, info.min, info.max))
        a[i] = v
        what = f"{kind} {name}[{i}]={v}"
    b = bytearray(blobs)
    b[e["offset"]:e["offset"] + e["length"]] = a.tobytes()
    return what, _join(header, bytes(b))


def run(case: str, seed: int, n: int) -> None:
    p, kw, _ = cases()[case]
    data, rest = snapshot(case)
    prog = cc.compile(p)
    rng = np.random.default_rng(seed)
    for k in range(n):
        what, bad = mutate(data, rng)
        print(f"mutation {k}: {what}", flush=True)
        try:
            m = cc.Matcher.restore(prog, bad)
        except SnapshotError:
            print("outcome SnapshotError", flush=True)
            continue
        try:
            m.process(rest.slice(0, 600))
            m.process(rest.slice(600))
            m.close()
            print("outcome ok", flush=True)
        except ColcepError as e:
            print(f"outcome {type(e).__name__}", flush=True)


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
