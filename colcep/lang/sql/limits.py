"""How big and how deep a MATCH_RECOGNIZE query may be, the same in every mode (``standard``,
``cep``, ``flink``). Past a limit the query is a :class:`SqlError` naming the clause and the limit,
raised before the recursive parsers and compilers run, so that no input ends in a
``RecursionError``, a ``MemoryError`` or a parse that takes minutes:

- :data:`MAX_QUERY_CHARS` characters of query text, where text inside a bracket opened right
  after a type's name (``ARRAY[...]``, ``ROW(...)``, ``DECIMAL(...)``) counts twice per such
  bracket: sqlglot reads it once as a type, then again as a value;
- :data:`MAX_NESTING` levels of parentheses, brackets, ``CASE ... END`` and prefix operators
  (``NOT``, unary ``-``) inside one clause;
- :data:`MAX_EXPRESSION_DEPTH` levels of a parsed expression's tree (each operator of
  ``a + b + c ...`` is a level);
- :data:`MAX_PATTERN_VARIABLES` distinct pattern variables;
- :data:`MAX_PATTERN_SIZE` variable positions in the pattern written out: a bounded quantifier
  ``{n,m}`` repeats its operand ``m`` times, ``PERMUTE`` lists every order;
- in the ``cep`` and ``flink`` modes, which lower DEFINE to colcep conditions:
  :data:`MAX_CONDITION_CASES` cases a condition's values split into (``CASE``, ``ABS``,
  ``FLOOR``, ``CEIL`` and aggregates of the variable being defined split them), and
  :data:`MAX_CONDITION_SIZE` nodes of the condition written out as a tree.

:func:`deep_stack` lets the parsers recurse as deep as these limits need, whatever Python's
recursion limit, and turns a RecursionError the limits did not foresee into a SqlError.
"""
from __future__ import annotations

import re
import sys
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator

from colcep.lang.sql.syntax import SqlError

MAX_QUERY_CHARS = 100_000
MAX_NESTING = 64
MAX_EXPRESSION_DEPTH = 256
MAX_PATTERN_VARIABLES = 1_000
MAX_PATTERN_SIZE = 2_000   # the cep engine's compile grows with its square: ~0.5 s at 2,000
MAX_CONDITION_CASES = 1_000
MAX_CONDITION_SIZE = 20_000

# Python frames the parsers may use past the caller's: sqlglot takes up to ~30 per bracket level,
# the compilers a few per tree level.
_STACK_BUDGET = 12_000

_TOKEN = re.compile(r"""'[^']*'?|"[^"]*"?|--[^\n]*|/\*(?:[^*]|\*(?!/))*(?:\*/)?|\w+|\S""")
_CLAUSE_WORDS = {"SELECT": "SELECT", "FROM": "FROM", "PARTITION": "PARTITION BY", "ORDER": "ORDER BY",
                 "MEASURES": "MEASURES", "ONE": "ROWS PER MATCH", "ALL": "ROWS PER MATCH",
                 "AFTER": "AFTER MATCH SKIP", "PATTERN": "PATTERN", "SUBSET": "SUBSET", "DEFINE": "DEFINE",
                 "WITHIN": "WITHIN"}
_PREFIX = {"NOT", "-", "+", "~", "!"}


@lru_cache(maxsize=1)
def _type_names() -> frozenset:
    """The words sqlglot's Trino and Snowflake dialects read as type names (``INT``, ``ARRAY``...)."""
    from sqlglot.dialects.snowflake import Snowflake
    from sqlglot.dialects.trino import Trino
    return frozenset(word.upper() for d in (Trino, Snowflake) for word, kind in d.tokenizer_class.KEYWORDS.items()
                     if kind in d.parser_class.TYPE_TOKENS)


def check_query(query: str) -> None:
    """The text limits: the query's (weighted) length and how deep each clause nests, checked
    in one pass over its tokens (quotes and comments skipped); a SqlError past either."""
    if len(query) > MAX_QUERY_CHARS:
        raise SqlError(f"the query is {len(query):,} characters long, more than colcep's limit of "
                       f"{MAX_QUERY_CHARS:,}")
    where, deepest, weighted = _scan(query)
    if deepest > MAX_NESTING:
        raise SqlError(f"{where}: nests {deepest} levels deep (parentheses, brackets, CASE or NOT), more than "
                       f"colcep's limit of {MAX_NESTING}; write it with fewer levels")
    if weighted > MAX_QUERY_CHARS:
        raise SqlError(f"the query is {weighted:,} characters long counting text inside a bracket after a type "
                       f"name (ARRAY[...], ROW(...), DECIMAL(...)) twice per such bracket, as the parser reads it, "
                       f"more than colcep's limit of {MAX_QUERY_CHARS:,}")


def _scan(query: str) -> tuple[str, int, int]:
    """(the clause nesting deepest, how deep, the weighted length): brackets and ``CASE`` open a
    level, each prefix operator of a run (``NOT NOT x``, ``- -x``) adds one; a clause's depth
    counts from where its keyword stands, ``DEFINE``'s named by its variable."""
    types = _type_names()
    stack: list[tuple[str, bool]] = []   # per open level: its opener, and whether it follows a type name
    clause, base, var, prev = "SELECT", 0, None, ""
    deepest, where, run, typed, weighted, end = 0, "SELECT", 0, 0, 0, 0
    for m in _TOKEN.finditer(query):
        tok = m.group()
        word = tok.upper()
        weighted += (m.end() - end) << typed
        end = m.end()
        if tok in ("(", "[") or word == "CASE":
            stack.append((word, tok != "CASE" and prev in types))
            typed += stack[-1][1]
        elif stack and (tok in (")", "]") or word == "END" and stack[-1][0] == "CASE"):
            typed -= stack.pop()[1]
        elif word in _CLAUSE_WORDS and len(stack) <= 1:
            clause, base, var = _CLAUSE_WORDS[word], len(stack), None
        elif word == "AS" and clause == "DEFINE" and len(stack) == base and prev:
            var = prev
        unary = word == "NOT" or word in _PREFIX and not _ends_value(prev)
        run = run + 1 if unary else 0
        if len(stack) - base + run > deepest:
            deepest, where = len(stack) - base + run, f"DEFINE {var}" if clause == "DEFINE" and var else clause
        prev = word
    return where, deepest, weighted


def _ends_value(token: str) -> bool:
    """Whether a ``-`` after this token is binary (it follows a name, number, string or bracket)."""
    return token[-1:] in (")", "]", "'", '"', "_") or token[-1:].isalnum()


def check_tree(clause: str, root: Any, children: Callable[[Any], Iterable[Any]] | None = None,
               limit: int = MAX_EXPRESSION_DEPTH, what: str = "the expression") -> None:
    """A SqlError when ``root``'s tree (a sqlglot expression unless ``children`` is given) is
    more than ``limit`` levels deep; walked without recursion."""
    children = children or (lambda node: node.iter_expressions())
    todo = [(root, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            raise SqlError(f"{clause}: {what} nests more than colcep's limit of {limit} levels (each operator and "
                           "bracket is a level); split it or write it with fewer levels")
        todo.extend((c, depth + 1) for c in children(node))


def check_pattern(n_variables: int, size: int) -> None:
    """The pattern's limits: its distinct variables, and its positions written out."""
    if n_variables > MAX_PATTERN_VARIABLES:
        raise SqlError(f"PATTERN: {n_variables:,} pattern variables, more than colcep's limit of "
                       f"{MAX_PATTERN_VARIABLES:,}")
    if size > MAX_PATTERN_SIZE:
        raise SqlError(f"PATTERN: the pattern written out holds {size:,} variable positions (a quantifier {{n,m}} "
                       f"repeats its operand m times, PERMUTE lists every order), more than colcep's limit of "
                       f"{MAX_PATTERN_SIZE:,}")


# ---------------------------------------------------------------------------- the stack
_lock = threading.Lock()
_holders = 0
_restore = 0


def _frames() -> int:
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


@contextmanager
def deep_stack(query: str) -> Iterator[None]:
    """Python's recursion limit raised (while any thread is inside) to what queries within the
    limits need; a RecursionError inside all the same is a SqlError naming the clause that nests
    deepest."""
    global _holders, _restore
    need = _frames() + _STACK_BUDGET
    with _lock:
        if _holders == 0:
            _restore = sys.getrecursionlimit()
        _holders += 1
        if sys.getrecursionlimit() < need:
            sys.setrecursionlimit(need)
    try:
        yield
    except RecursionError:
        where, deepest, _ = _scan(query)
        raise SqlError(f"{where}: nests too deeply for colcep's SQL parser ({deepest} levels of parentheses, "
                       "brackets, CASE or NOT; operators chained one inside another); write it with fewer "
                       "levels") from None
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                sys.setrecursionlimit(_restore)
