"""The standard mode's ground truth (issue 28): the backtracking reference of SQL:2016 row pattern
recognition gives Trino's results on Trino's own tests (tests/data/sql_standard_trino.json)."""
from __future__ import annotations

import json
import pathlib
from collections import Counter

import pytest

import functools

from sqlstd_reference import Matcher, StdError, TooLong, reference
from sqlstd_threads import ThreadMatcher

CORPUS = pathlib.Path(__file__).parent / "data" / "sql_standard_trino.json"
CASES = json.loads(CORPUS.read_text())["cases"]
RUN = [c for c in CASES if "skip" not in c]


def _norm(v):
    if isinstance(v, float) and v == int(v):
        return int(v)
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v


def run(case) -> list[tuple]:
    """The backtracking reference, or where it would take exponential time (Trino's
    testPotentiallyExponentialMatch) the thread machine, which test_sql_standard_threads checks
    against it."""
    cols, data = case["input"]["columns"], case["input"]["rows"]
    try:
        return reference(case["query"], cols, data, functools.partial(Matcher, budget=200_000))
    except TooLong:
        return reference(case["query"], cols, data, ThreadMatcher)


@pytest.mark.parametrize("case", RUN, ids=[c["name"] for c in RUN])
def test_reference_gives_trinos_results(case):
    exp_ = case["expected"]
    if "error" in exp_:
        with pytest.raises(StdError) as err:
            run(case)
        words = [w for w in exp_["error"].lower().replace(":", " ").split() if len(w) > 3][:4]
        assert words and any(w in str(err.value).lower() for w in words), (exp_["error"], str(err.value))
        return
    got = [tuple(_norm(v) for v in r) for r in run(case)]
    if exp_.get("empty"):
        assert got == []
        return
    want = [tuple(_norm(v) for v in r) for r in exp_["rows"]]
    if exp_.get("ordered"):
        assert got == want
    else:
        assert Counter(got) == Counter(want)


def test_the_corpus_is_mostly_runnable():
    assert len(CASES) >= 100 and len(RUN) >= 0.9 * len(CASES)
