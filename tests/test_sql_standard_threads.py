"""The thread machine prototyped for the standard mode's kernel (issue 28, tests/sqlstd_threads.py)
finds the same preferred matches as the backtracking reference (tests/sqlstd_reference.py) on
random patterns and data, in linear time where the reference is exponential."""
from __future__ import annotations

import random
import re

import pytest

from sqlstd_reference import Matcher, StdError, TooLong, parse
from sqlstd_threads import ThreadMatcher

CONDS = ["value > 2", "value < PREV(value)", "value >= PREV(value, 2)", "value > A.value", "value <= LAST(A.value, 1)",
         "COUNT(A.*) < 3", "SUM(B.value) < 8", "value > FIRST(B.value)", "NEXT(value) > value",
         "CLASSIFIER(U) = 'A' OR value = 0", "PREV(LAST(A.value), 1) < value", "MATCH_NUMBER() < 3"]


def _pattern(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.35:
        atom = rng.choice(["A", "B", "C"])
    elif r < 0.55:
        atom = "(" + " ".join(_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3))) + ")"
    elif r < 0.7:
        atom = "(" + " | ".join(_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    elif r < 0.78:
        atom = "PERMUTE(" + ", ".join(rng.sample(["A", "B", "C"], rng.randint(2, 3))) + ")"
    elif r < 0.86:
        atom = "{- " + _pattern(rng, depth + 1) + " -}"
    elif r < 0.9:
        atom = rng.choice(["^", "$", "()"])
    else:
        atom = "(" + _pattern(rng, depth + 1) + ")"
    q = rng.choice(["", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{,2}", "{2,}", "{0,2}?"])
    return atom + q if atom not in ("^", "$") else atom


def refs(text: str) -> set[str]:
    """The labels a condition, measure or skip names (A, B, C, or the union U)."""
    return set(re.findall(r"\b([ABCU])\.", text)) | set(re.findall(r"(?:CLASSIFIER|TO FIRST|TO LAST|TO)[( ]([ABCU])\b",
                                                                      text))


def parts(rng: random.Random) -> tuple[str, list[str], str, set[str]]:
    """A random row pattern, its variables, the union U over them (A and C where present) and the
    labels a query may name: the standard refuses a label the pattern lacks."""
    pat = " ".join(_pattern(rng) for _ in range(rng.randint(1, 3)))
    present = sorted(set(re.findall(r"\b([ABC])\b", pat)))
    if not present:
        pat, present = pat + " A", ["A"]
    union = ", ".join([v for v in ("A", "C") if v in present] or present[:1])
    return pat, present, union, set(present) | {"U"}


def defines(rng: random.Random, present: list[str], known: set[str]) -> str:
    conds = [c for c in CONDS if refs(c) <= known]
    return ", ".join(f"{v} AS {rng.choice(conds)}" for v in rng.sample(present, rng.randint(1, len(present))))


def _query(rng: random.Random) -> str:
    pat, present, union, known = parts(rng)
    return (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
            f"PATTERN ({pat}) SUBSET U = ({union}) DEFINE {defines(rng, present, known)})")


@pytest.mark.parametrize("seed", range(8))
def test_thread_machine_finds_the_references_match(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(60):
        q = parse(_query(rng))
        n = rng.randint(0, 9)
        rows = [{"id": i, "value": rng.randint(0, 5)} for i in range(n)]
        for start in range(n + 1):
            try:
                want = Matcher(q, rows, 1, budget=100_000).find(start)
            except (StdError, TooLong):  # (a few random nestings are beyond backtracking)
                continue
            got = ThreadMatcher(q, rows, 1).find(start)
            assert got == want, (q, rows, start)
            checked += 1
    assert checked > 200


def test_thread_machine_is_linear_where_backtracking_is_exponential():
    """``(A+)+ B`` over 20 rows with no B: backtracking tries every split of the A rows (2^19 of
    them from the first row); the thread machine keeps at most one thread per instruction."""
    q = parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ONE ROW PER MATCH "
              "PATTERN ((A+)+ B) DEFINE A AS value >= 0, B AS value < 0)")
    rows = [{"id": i, "value": i} for i in range(20)]
    tm = ThreadMatcher(q, rows, 1)
    assert all(tm.find(s) is None for s in range(20))
    assert tm.peak <= len(tm.prog)
    small = [{"id": i, "value": i} for i in range(8)]
    assert all(ThreadMatcher(q, small, 1).find(s) == Matcher(q, small, 1).find(s) for s in range(8))


def test_history_dependent_conditions_keep_their_threads_apart():
    """``value > LAST(A.value, 1)`` reads how earlier rows were labelled: threads that labelled
    differently are not merged, and the preferred match is the reference's."""
    q = parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
              "PATTERN ((A | B)+ C) DEFINE A AS value > 1, C AS value > LAST(A.value, 1))")
    rows = [{"id": i, "value": v} for i, v in enumerate([3, 2, 5, 1, 4, 6, 0, 7])]
    for s in range(len(rows)):
        assert ThreadMatcher(q, rows, 1).find(s) == Matcher(q, rows, 1).find(s)
