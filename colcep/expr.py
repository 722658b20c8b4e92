"""The condition language: immutable expression trees built with Python operators.

    col("price") > 1.05 * last("price", of="a")
    (col("volume") > 1000) & col("name").is_in(["IBM", "MSFT"])
    col("price") > avg("price", of=["a", "rise"])

Expressions are data, never Python callbacks: the compiler turns event-only parts into
column masks evaluated once per batch and the parts that read the partial match into
bytecode for the kernels (``colcep.engine.conditions``).

Null semantics: a comparison with a null operand is false (SQL), ``!=`` included; ``~``,
``&`` and ``|`` are then plain boolean logic. Aggregates over no events: ``count`` and
``sum`` are 0, ``avg``/``min``/``max``/``first``/``last`` are null. Arithmetic is float64.

History (``prev``, ``rolling``) reads the key's earlier events, whether or not they are in the
match; it is event-only (a column computed per key before matching, carried across batches
and snapshots by ``colcep.engine.history``), so it may appear anywhere a column may.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/", "quot")
AGG_FUNCS = ("first", "last", "sum", "count", "avg", "min", "max")
ROLL_FUNCS = ("sum", "mean", "min", "max", "count")
HIST_OPS = ("prev", "roll")


@dataclass(frozen=True, eq=False)
class Expr:
    """A node of a condition expression. Build with ``col``, ``lit`` and the aggregate
    functions; combine with ``+ - * /``, comparisons, ``&``, ``|``, ``~``."""

    op: str  # col | lit | agg | arith | cmp | and | or | not | isin | isnull | true | prev | roll
    args: tuple

    # -- building ------------------------------------------------------------------
    def _bin(self, op: str, other: Any, reflected: bool = False) -> "Expr":
        other = wrap(other)
        a, b = (other, self) if reflected else (self, other)
        if op in ARITH_OPS:
            return Expr("arith", (op, a, b))
        return Expr("cmp", (op, a, b))

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __neg__(self): return Expr("arith", ("-", lit(0.0), self))

    def quot(self, other: Any) -> "Expr":
        """The quotient truncated toward zero (SQL's division of integers: 7 / 2 is 3, -7 / 2 is -3)."""
        return self._bin("quot", other)
    def __eq__(self, o): return self._bin("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._bin("!=", o)  # type: ignore[override]
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)

    def __and__(self, o): return Expr("and", (self, wrap(o)))
    def __rand__(self, o): return Expr("and", (wrap(o), self))
    def __or__(self, o): return Expr("or", (self, wrap(o)))
    def __ror__(self, o): return Expr("or", (wrap(o), self))
    def __invert__(self): return Expr("not", (self,))

    def is_in(self, values: Iterable[Any]) -> "Expr":
        """True where the value equals one of ``values`` (numbers or strings)."""
        vals = tuple(values)
        if not vals:
            raise ValueError("is_in() needs at least one value")
        return Expr("isin", (self, vals))

    def is_null(self) -> "Expr":
        """True where the value is null (a null column entry or an empty aggregate)."""
        return Expr("isnull", (self,))

    def __bool__(self):
        raise TypeError(
            "a colcep expression has no truth value: combine conditions with & | ~ "
            "(not 'and', 'or', 'not') and use .is_in([...]) instead of 'in'")

    def __contains__(self, item):
        self.__bool__()

    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    # -- introspection ---------------------------------------------------------------
    def key(self) -> tuple:
        """A hashable structural key (``==`` is overloaded, so use this to compare trees)."""
        if self.op == "agg":
            f = self.args[1]
            return ("agg", self.args[0], f.key() if isinstance(f, Expr) else f, self.args[2])
        if self.op in ("col", "lit", "true"):
            return (self.op,) + tuple(self.args)
        if self.op == "isin":
            return ("isin", self.args[0].key(), self.args[1])
        return (self.op,) + tuple(a.key() if isinstance(a, Expr) else a for a in self.args)

    def columns(self) -> set[str]:
        """Names of the input columns the expression reads (current event and aggregates)."""
        if self.op == "col":
            return {self.args[0]}
        if self.op == "agg":
            f = self.args[1]
            return f.columns() if isinstance(f, Expr) else {f} if f is not None else set()
        out: set[str] = set()
        for a in self.args:
            if isinstance(a, Expr):
                out |= a.columns()
        return out

    def stages(self) -> set[str]:
        """Names of the stages whose events the expression aggregates over."""
        if self.op == "agg":
            return set(self.args[2])
        out: set[str] = set()
        for a in self.args:
            if isinstance(a, Expr):
                out |= a.stages()
        return out

    def reads_match(self) -> bool:
        """True when the value depends on the partial match (contains an aggregate)."""
        return bool(self.stages()) or self.op == "agg"

    def __repr__(self) -> str:
        op, a = self.op, self.args
        if op == "col":
            return f"col({a[0]!r})"
        if op == "lit":
            return repr(a[0])
        if op == "agg":
            st = a[2][0] if len(a[2]) == 1 else list(a[2])
            return f"{a[0]}({a[1]!r}, of={st!r})"
        if op == "prev":
            return f"prev({a[0]!r}, {a[1]})"
        if op == "roll":
            func, src, rows, within, cur = a
            opts = "".join([f", rows={rows}" if rows is not None else "",
                            f", within={within!r}" if within is not None else "",
                            ", include_current=True" if cur else ""])
            return f"rolling({src!r}, {func!r}{opts})"
        if op == "arith" and a[0] == "quot":
            return f"{a[1]!r}.quot({a[2]!r})"
        if op in ("arith", "cmp"):
            return f"({a[1]!r} {a[0]} {a[2]!r})"
        if op in ("and", "or"):
            return f"({a[0]!r} {'&' if op == 'and' else '|'} {a[1]!r})"
        if op == "not":
            return f"~{a[0]!r}"
        if op == "true":
            return "TRUE"
        if op == "isin":
            return f"{a[0]!r}.is_in({list(a[1])!r})"
        return f"{a[0]!r}.is_null()"


def wrap(value: Any) -> Expr:
    """An Expr as is; a Python number, bool or string as a literal."""
    if isinstance(value, Expr):
        return value
    return lit(value)


def col(name: str) -> Expr:
    """The named column of the current event."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"col() takes a column name, got {name!r}")
    return Expr("col", (name,))


def lit(value: Any) -> Expr:
    """A constant: number, bool, string or None (null)."""
    if value is not None and not isinstance(value, (int, float, bool, str)):
        raise TypeError(f"unsupported literal {value!r}: use a number, bool, string or None")
    if isinstance(value, bool):
        value = float(value)
    elif isinstance(value, int):
        value = float(value)
    return Expr("lit", (value,))


TRUE = Expr("true", ())  # the always-true condition (Flink's BooleanConditions.trueFunction)


def _agg(func: str, field: "str | Expr | None", of: str | Sequence[str]) -> Expr:
    stages = (of,) if isinstance(of, str) else tuple(of)
    if not stages or not all(isinstance(s, str) and s for s in stages):
        raise TypeError(f"{func}(): 'of' names one stage or a list of stages, got {of!r}")
    if isinstance(field, Expr):
        if field.op == "col":
            field = field.args[0]           # sum(col("price")) is sum("price")
        elif field.reads_match():
            raise TypeError(f"{func}(): the value aggregated must read only the event (a column or an expression "
                            f"over its columns), not the match: {field!r}")
        elif field.op in ("lit", "true"):
            raise TypeError(f"{func}(): aggregate a column or an expression over columns, got the constant {field!r}")
    elif field is not None and not isinstance(field, str):
        raise TypeError(f"{func}(): the field is a column name or an expression, got {field!r}")
    return Expr("agg", (func, field, tuple(dict.fromkeys(stages))))


def first(field: "str | Expr", of: str | Sequence[str]) -> Expr:
    """The field of the first event accepted into the stage(s) so far (null if none)."""
    return _agg("first", field, of)


def last(field: "str | Expr", of: str | Sequence[str]) -> Expr:
    """The field of the latest event accepted into the stage(s) so far (null if none)."""
    return _agg("last", field, of)


def sum(field: "str | Expr", of: str | Sequence[str]) -> Expr:  # noqa: A001 - mirrors SQL
    """Sum of the field over the events accepted into the stage(s) so far (0 if none). The field
    is a column name or an event-only expression: ``sum(col("price") * col("volume"), of="b")``."""
    return _agg("sum", field, of)


def count(of: str | Sequence[str], field: "str | Expr | None" = None) -> Expr:
    """Number of events accepted into the stage(s) so far."""
    return _agg("count", field, of)


def avg(field: "str | Expr", of: str | Sequence[str]) -> Expr:
    """Mean of the field over the events accepted into the stage(s) so far (null if none)."""
    return _agg("avg", field, of)


def min(field: "str | Expr", of: str | Sequence[str]) -> Expr:  # noqa: A001
    """Minimum of the field over the events accepted into the stage(s) so far (null if none)."""
    return _agg("min", field, of)


def max(field: "str | Expr", of: str | Sequence[str]) -> Expr:  # noqa: A001
    """Maximum of the field over the events accepted into the stage(s) so far (null if none)."""
    return _agg("max", field, of)


# ----------------------------------------------------------------------------- history
def _source(value: "str | Expr", fn: str) -> Expr:
    if isinstance(value, str):
        return col(value)
    if not isinstance(value, Expr):
        raise TypeError(f"{fn}(): takes a column name or an expression over the event's columns, got {value!r}")
    if value.reads_match():
        raise TypeError(f"{fn}(): the value must read only the event (its columns), not the match: {value!r}")
    if value.op in ("lit", "true") or not value.columns():
        raise TypeError(f"{fn}(): takes a column or an expression over columns, got {value!r}")
    if _has_history(value):
        raise TypeError(f"{fn}(): the value cannot itself read the history (prev / rolling): {value!r}")
    return value


def _has_history(e: Expr) -> bool:
    return e.op in HIST_OPS or any(_has_history(a) for a in e.args if isinstance(a, Expr))


def prev(column: "str | Expr", k: int = 1) -> Expr:
    """The value of ``column`` (a name or an expression over the event's columns) at the key's
    ``k``-th previous event, whether or not that event is in the match (SQL MATCH_RECOGNIZE's
    ``PREV``); null when the key has fewer than ``k`` earlier events. ``prev("price")`` is the
    previous tick's price; ``prev(col("price") * col("volume"), 3)`` the turnover 3 ticks ago."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TypeError(f"prev(): k is an int >= 1, got {k!r}")
    return Expr("prev", (_source(column, "prev"), int(k)))


def rolling(column: "str | Expr", func: str, rows: "int | None" = None, within: Any = None,
            include_current: bool = False) -> Expr:
    """An aggregate of ``column`` (a name or an expression over the event's columns) over the
    key's preceding events, whether or not they are in the match.

    func: ``"sum"``, ``"mean"`` (or ``"avg"``), ``"min"``, ``"max"``, ``"count"``.
    rows: the last ``rows`` events of the key; within: the events of the key less than
        ``within`` before this one (``"1min"``, a timedelta, or an int in the time column's unit:
        times in ``(t - within, t]``, ties included when they came earlier). Either or both (then
        an event must satisfy both).
    include_current: False (default): the window is the events *before* the current one (the
        ``rows`` events before it; the earlier events within ``within``), so "price above the mean
        of the previous 20 ticks" is ``col("price") > rolling("price", "mean", rows=20)``.
        True: the current event and the ones before it (``rows`` events in all), as pandas'
        ``rolling``.

    Nulls (and NaN) are skipped: ``count`` counts non-null values; ``sum`` of none is 0,
    ``mean``/``min``/``max`` of none are null (so the key's first event has a null history).
    A window is summed in an order fixed by its events alone (``kernels.history``), so a value
    never depends on how the stream was split into batches."""
    if func == "avg":
        func = "mean"
    if func not in ROLL_FUNCS:
        raise TypeError(f"rolling(): func is one of {', '.join(ROLL_FUNCS)}, got {func!r}")
    if rows is None and within is None:
        raise TypeError("rolling(): give rows= (a number of events), within= (a duration) or both")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise TypeError(f"rolling(): rows is an int >= 1, got {rows!r}")
    if within is not None:
        from colcep.durations import check_duration
        check_duration(within, "rolling() within", error=TypeError)
    if not isinstance(include_current, bool):
        raise TypeError(f"rolling(): include_current is True or False, got {include_current!r}")
    return Expr("roll", (func, _source(column, "rolling"), rows, within, include_current))
