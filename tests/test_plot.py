"""Pictures (colcep.tools.plot and ``colcep plot``): the files are written and they show what was
found: one marked point per matched event, by stage; bars that add up to the matches; the top
keys with their counts. No pixel comparisons."""
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from matplotlib.collections import LineCollection, PathCollection

import colcep
from colcep.cli import main
from colcep.tools.summary import TimeHistogram, summarize
from colcep.tools.examples import get_example
from colcep.tools.plot import plot_key, plot_overview, plot_scan
from colcep.tools.ticks import make_ticks, write_ticks

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def scan():
    ticks = make_ticks(30_000, 6, 7)
    out = colcep.match(ticks, get_example("paper_query3").pattern, key="name", time="ts",
                       columns=["ts", "price", "volume"])
    assert out.num_rows > 1000
    return ticks, out


def marked(ax) -> dict[str, int]:
    """Points per stage: the scatter collections, by their legend label ``stage s (n events)``."""
    got = {}
    for c in ax.collections:
        if isinstance(c, PathCollection):
            got[c.get_label().split()[1]] = len(c.get_offsets())
    return got


def of_key(tbl: pa.Table, key: str) -> pa.Table:
    return tbl.filter(pc.equal(tbl.column("name"), key))


def test_plot_key_marks_every_matched_event_by_stage(scan, tmp_path):
    ticks, out = scan
    fig = plot_key(ticks, out, "S0002", column="price", out=tmp_path / "k.png")
    assert (tmp_path / "k.png").read_bytes()[:8] == PNG
    ax = fig.axes[0]
    mine = of_key(out, "S0002")
    assert marked(ax) == dict(Counter(mine.column("stage").to_pylist()))
    # the price line is the key's whole series, in time order; its values are the key's prices
    (line,) = ax.get_lines()
    series = of_key(ticks, "S0002")
    assert len(line.get_xdata()) == series.num_rows
    assert np.allclose(np.sort(line.get_ydata()), np.sort(series.column("price").to_numpy()))
    assert np.all(np.diff(line.get_xdata()) >= 0)
    # one connecting polyline per match with more than one event
    (lc,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(lc.get_segments()) == len(set(mine.column("match_id").to_pylist()))
    n = len(set(mine.column("match_id").to_pylist()))
    assert ax.get_title() == f"S0002: price over time, {n:,} matches marked by stage"
    assert ax.get_xlabel() == "ts (s)" and ax.get_ylabel() == "price"
    # the marked points sit on the events' (time, price)
    pts = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])
    want = np.column_stack([mine.column("ts").to_numpy() / 1000.0, mine.column("price").to_numpy()])
    assert sorted(map(tuple, pts.round(6))) == sorted(map(tuple, want.round(6)))


def test_plot_key_zoom_and_any_column(scan):
    ticks, out = scan
    mine = of_key(out, "S0001")
    ids = list(dict.fromkeys(mine.sort_by([("match_id", "ascending")]).column("match_id").to_pylist()))[:5]
    first = mine.filter(pc.is_in(mine.column("match_id"), pa.array(ids)))
    fig = plot_key(ticks, out, "S0001", column="volume", max_matches=5)
    ax = fig.axes[0]
    assert sum(marked(ax).values()) == first.num_rows
    assert "its first 5 of" in ax.get_title() and ax.get_ylabel() == "volume"
    # the drawn series covers the zoomed range only (with a small margin)
    x = ax.get_lines()[0].get_xdata()
    lo, hi = pc.min(first.column("ts")).as_py() / 1000, pc.max(first.column("ts")).as_py() / 1000
    assert x.min() >= lo - (hi - lo) * 0.06 and x.max() <= hi + (hi - lo) * 0.06
    assert len(x) < of_key(ticks, "S0001").num_rows


def test_plot_key_looks_up_missing_columns_by_row(scan):
    """Compact matches (no ts / price) take both from the input through ``row`` = ``seq``."""
    ticks, _ = scan
    compact = colcep.match(ticks, get_example("paper_query3").pattern, key="name", time="ts", columns=[])
    assert "price" not in compact.column_names
    ax = plot_key(ticks, compact, "S0003", seq="id").axes[0]
    assert sum(marked(ax).values()) == of_key(compact, "S0003").num_rows
    with pytest.raises(ValueError, match="no \\['ts', 'price'\\] column"):
        plot_key(None, compact, "S0003")


def test_plot_key_leaves_out_timed_out_partial_matches():
    ticks = make_ticks(8000, 2, 5)
    out = colcep.match(ticks, get_example("paper_query3").pattern, key="name", time="ts",
                       columns=["ts", "price"], timeouts=True)
    done = out.filter(pc.invert(out.column("timed_out")))
    assert done.num_rows < out.num_rows
    ax = plot_key(ticks, out, "S0000").axes[0]
    assert sum(marked(ax).values()) == of_key(done, "S0000").num_rows


def test_plot_key_dates(tmp_path):
    """Epoch milliseconds and Arrow timestamps draw on a date axis."""
    ticks = make_ticks(5000, 2, 3)
    epoch = ticks.set_column(2, "ts", pc.add(ticks.column("ts"), 1_700_000_000_000))
    pat = get_example("three_rising").pattern
    out = colcep.match(epoch, pat, key="name", time="ts", columns=["ts", "price"])
    ax = plot_key(epoch, out, "S0001", out=tmp_path / "d.png").axes[0]
    assert ax.get_xlabel() == "ts (UTC)" and sum(marked(ax).values()) == of_key(out, "S0001").num_rows
    stamped = epoch.set_column(2, "ts", epoch.column("ts").cast(pa.timestamp("ms")))
    out2 = colcep.match(stamped, pat, key="name", time="ts", columns=["ts", "price"])
    ax = plot_key(stamped, out2, "S0001").axes[0]
    assert sum(marked(ax).values()) == of_key(out2, "S0001").num_rows
    fig = plot_overview(out2, out=tmp_path / "o.png")
    assert sum(p.get_height() for p in fig.axes[0].patches) == len(set(out2.column("match_id").to_pylist()))


def test_plot_overview_counts(scan, tmp_path):
    _, out = scan
    fig = plot_overview(out, key="name", top=4, bins=25, out=tmp_path / "o.png")
    assert (tmp_path / "o.png").read_bytes()[:8] == PNG
    ax_t, ax_k = fig.axes
    n = len(set(out.column("match_id").to_pylist()))
    assert len(ax_t.patches) == 25 and sum(p.get_height() for p in ax_t.patches) == n
    assert ax_t.get_title() == f"{n:,} matches over time"
    s = summarize(out, "name", top=4)
    bars = {t.get_text(): p.get_width() for t, p in zip(ax_k.get_yticklabels(), ax_k.patches)}
    assert bars == s["top_keys"]
    assert ax_k.get_title() == "top 4 of 6 names with matches"
    with pytest.raises(ValueError, match="no 'ts' column"):
        plot_overview(out.drop_columns(["ts"]))


def test_scan_picture_and_plot_command(tmp_path, capsys):
    data = write_ticks(tmp_path / "t.parquet", 20_000, 5, seed=2)
    assert main(["scan", str(data), "--pattern", "paper_query3", "--in-process", "--out", str(tmp_path / "m")]) == 0
    printed = capsys.readouterr().out
    png = tmp_path / "m.png"
    assert f"picture   {png}" in printed and png.read_bytes()[:8] == PNG
    # plot_scan: overview, top keys, and the top key zoomed to its first 12 matches
    fig = plot_scan(tmp_path / "m", out=tmp_path / "again.png")
    ax_t, ax_k, ax_key = fig.axes
    import pyarrow.dataset as ds

    out = ds.dataset(str(tmp_path / "m"), format="parquet").to_table()
    n = len(set(out.column("match_id").to_pylist()))
    assert sum(p.get_height() for p in ax_t.patches) == n
    top = summarize(out, "name")["top_keys"]
    top_key = next(iter(top))
    assert ax_key.get_title().startswith(f"{top_key}: price over time, its first 12 of {top[top_key]} matches")
    mine = of_key(out, top_key).sort_by("match_id")
    ids = list(dict.fromkeys(mine.column("match_id").to_pylist()))[:12]
    assert sum(marked(ax_key).values()) == mine.filter(pc.is_in(mine.column("match_id"), pa.array(ids))).num_rows
    # colcep plot: the overview again, and one key (all its matches) with any column
    (tmp_path / "m.png").unlink()
    assert main(["plot", str(tmp_path / "m")]) == 0
    assert png.read_bytes()[:8] == PNG and f"wrote {png}" in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "m"), "--key", "S0003", "--column", "volume"]) == 0
    assert (tmp_path / "m_S0003.png").read_bytes()[:8] == PNG
    assert main(["plot", str(tmp_path / "m"), "--key", "S0003", "--first", "3", "--out",
                 str(tmp_path / "pics" / "s3.png")]) == 0
    assert (tmp_path / "pics" / "s3.png").is_file()
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "m"), "--key", "NOPE"]) == 2
    assert "no matches for name = 'NOPE'" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nothing")]) == 2
    assert "is not a folder of matches" in capsys.readouterr().err


def test_match_starts_reads_batches_of_any_size_as_one_table():
    """``match_starts`` (the overview of a scan, read a batch at a time): each match's first time
    and the matches per key, the same for any batch size (a match split across batches, ids that
    restart per pattern, timed-out partial matches left out, a match whose first row is not its
    earliest: rows go by stage, and a loop of alternatives takes them in any order) as a group-by
    over the whole table."""
    from colcep.tools.plot import match_starts
    from colcep.tools.summary import unique_match_ids

    ticks = make_ticks(4000, 5, 11)
    pats = {n: get_example(n).pattern for n in ("paper_query3", "three_rising")}
    big, small = colcep.Pattern.begin("x").where(colcep.col("volume") > 500), \
        colcep.Pattern.begin("y").where(colcep.col("volume") <= 500)
    pats["alternating"] = colcep.Pattern.begin(colcep.Pattern.any_of(big, small)).times(3).consecutive()
    out = colcep.match_many(ticks, {n: p.within("20s") for n, p in pats.items()}, key="name", time="ts",
                            columns=["ts"], timeouts=True)
    assert set(out.column("pattern").to_pylist()) == set(pats) and pc.any(out.column("timed_out")).as_py()
    done = unique_match_ids(out).filter(pc.invert(out.column("timed_out")))
    firsts = done.group_by("match_id").aggregate([("ts", "min"), ("name", "min")])
    want_starts = sorted(firsts.column("ts_min").to_pylist())
    want_keys = Counter(firsts.column("name_min").to_pylist())
    assert len(want_starts) > 100
    want = TimeHistogram()
    want.add(np.array(want_starts, np.int64))
    for size in (1, 2, 3, 7, 64, out.num_rows):
        start, per_key = match_starts(out.to_batches(max_chunksize=size), "name", "ts")
        assert (start.width, start.origin, start.lo, start.hi) == (want.width, want.origin, want.lo, want.hi), size
        assert np.array_equal(start.counts, want.counts) and start.total == len(want_starts), size
        assert per_key == want_keys, size
    empty, none = match_starts(out.slice(0, 0).to_batches(), "name", "ts")
    assert empty.total == 0 and none == {}


def _drawn(fig) -> tuple:
    """What a scan's picture shows: the overview's bars, the top keys' bars, the key's title and
    its marked events per stage."""
    ax_t, ax_k, ax_key = fig.axes
    return ([p.get_height() for p in ax_t.patches], ax_t.get_title(),
            {t.get_text(): p.get_width() for t, p in zip(ax_k.get_yticklabels(), ax_k.patches)},
            ax_key.get_title(), marked(ax_key))


def test_a_scan_draws_its_picture_from_its_own_counts(tmp_path):
    """``colcep scan`` keeps each match's first time as it writes (``Summary(first_times=)``), so
    its picture reads only the drawn key's rows back (row group by row group, the key column
    first): the picture is the one drawn from the folder alone, several patterns and row groups."""
    from colcep.tools.plot import match_starts
    from colcep.tools.summary import Summary

    data = write_ticks(tmp_path / "t.parquet", 30_000, 6, seed=3)
    assert main(["scan", str(data), "--pattern", "paper_query3,three_rising", "--in-process", "--batch-rows",
                 "4000", "--out", str(tmp_path / "m"), "-q"]) == 0
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "m" / "part-00000.parquet").num_row_groups > 3
    out = ds.dataset(str(tmp_path / "m"), format="parquet").to_table()
    assert out.schema.field("pattern").type == out.schema.field("stage").type == pa.dictionary(pa.int32(), pa.string())
    counted = Summary("name", time="ts", named=True, starts=True)
    for b in out.to_batches(max_chunksize=777):
        counted.add(b)
    starts, per_key = counted.start_times(), dict(counted.per_key())
    want_starts, want_keys = match_starts(out.to_batches(), "name", "ts")
    assert np.array_equal(starts.counts, want_starts.counts) and per_key == want_keys
    read = _drawn(plot_scan(tmp_path / "m", out=tmp_path / "a.png"))
    kept = _drawn(plot_scan(tmp_path / "m", out=tmp_path / "b.png", overview=(starts, per_key)))
    assert kept == read and sum(read[0]) == starts.total > 100 and sum(read[4].values()) > 0
    assert "its first 12 of" in read[3]  # (only the key's first 12 matches' rows were read for it)
    assert Summary("name", time="ts").start_times() is None
