"""The SASE+ query language (Agrawal, Diao, Gyllstrom, Immerman: *Efficient Pattern Matching
over Event Streams*, SIGMOD 2008), compiled to a colcep :class:`~colcep.pattern.Pattern`::

    q = colcep.sase('''
        PATTERN SEQ(Stock+ a[ ], Stock b)
        WHERE   skip_till_next_match(a[ ], b) {
                    [symbol]
                and a[1].volume > 1000
                and a[i].price > avg(a[..i-1].price)
                and b.volume < 80%*a[a.LEN].volume }
        WITHIN  1 hour''')
    q.pattern, q.key                          # a Pattern, and "symbol" (from [symbol])
    out = q.match(ticks, time="ts")           # = colcep.match(ticks, q.pattern, key=q.key, ...)

The language
------------
``PATTERN SEQ(component, ...)`` where a component is ``Type var`` (one event), ``Type+ var[]``
(Kleene plus: one or more events) or ``~(Type var)`` (negation: no such event there; ``(Type
var)`` without ``~`` is a plain component). With ``type_column="kind"`` a component of type
``Shelf`` takes only events whose ``kind`` is ``"Shelf"``; without a type column the types are
not checked (then the query may use only one type name, e.g. ``Stock``).

``WHERE strategy(vars) { predicates }`` (braces optional): the selection strategy of the whole
query and predicates joined by ``and``:

- ``strict_contiguity``: matched events are adjacent in the stream (``next``, ``consecutive()``
  loops, ``not_next``);
- ``partition_contiguity``: adjacent within their partition (SASE+ §2: the partition is the
  ``[attr]`` equivalence test): matched per key ``[key..., attr...]`` with strict contiguity,
  i.e. per (match key, ``attr``) sub-stream, the match's events adjacent in that sub-stream and
  events of other partitions in between ignored. Without ``[attr]`` the partition is ``key=``;
  with neither it raises a SaseError;
- ``skip_till_next_match`` (default): irrelevant events are skipped (``followed_by``, relaxed
  loops, ``not_followed_by``);
- ``skip_till_any_match``: every combination of relevant events (``followed_by_any``,
  ``allow_combinations()`` loops).

Predicates compare values with ``= != <> < <= > >=`` and combine them with ``and``, ``or``,
``not`` and parentheses; values are numbers, ``'strings'``, percentages (``80%*x`` is ``0.8*x``),
``+ - * /`` and references:

- ``v.attr`` for a one-event variable; for a Kleene variable ``v[i].attr`` (the event being
  added), ``v[1].attr`` (the first), ``v[i-1].attr`` (the one before the current),
  ``v[v.LEN].attr`` (the last, from a later variable);
- aggregates ``avg sum count min max`` over ``v[..i-1].attr`` (the events of ``v`` before the
  current one) or ``v[].attr`` / ``v[..v.LEN].attr`` (all of them, from a later variable);
- ``[attr]``: the equivalence test, every event of the match has the same ``attr``.

A predicate belongs to the latest variable it mentions (the paper's rule) and becomes part of
that stage's condition. On a Kleene variable, a predicate that mentions ``v[1]`` only (as the
current event) holds for the first event; one that mentions ``v[i-1]`` or ``v[..i-1]`` holds for
the second and later events (there is no ``v[0]``); any other holds for every event.

``[attr]`` becomes the match key when the caller gives no other (matching per key is the same
as the equality test under both skip strategies); under ``strict_contiguity``, or when another
key is given, it becomes equality conditions on ``attr`` instead; under
``partition_contiguity`` it joins the match key (above). ``key=`` is a column or a sequence of
columns (a composite key, as for :func:`colcep.match`). ``WITHIN 12 hours`` (seconds,
minutes, hours, days, ms; or a bare integer in the time column's unit) is the window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from colcep.errors import PatternError
from colcep.expr import Expr, col, count, first, last, lit
from colcep.expr import _agg as _make_agg
from colcep.engine.keys import key_names, normalize_key
from colcep.pattern import KeyedPattern, Pattern
from colcep.skip import AfterMatchSkipStrategy

GRAMMAR = r"""
start: "PATTERN"i seq where? within?

seq: "SEQ"i "(" component ("," component)* ")"
component: NAME NAME                          -> single
         | NAME "+" NAME "[" "]"              -> kleene
         | "~" "(" NAME NAME ")"              -> negated
         | "(" NAME NAME ")"                  -> single

where: "WHERE"i strategy? "{" cond? "}"
     | "WHERE"i strategy? cond
     | "WHERE"i strategy
strategy: STRATEGY "(" [svar ("," svar)*] ")"
svar: NAME ["[" "]"]
STRATEGY.2: /(?i:strict_contiguity|partition_contiguity|skip_till_next_match|skip_till_any_match)\b/

within: "WITHIN"i NUMBER [UNIT]
UNIT.2: /(?i:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)\b/

?cond: disj
?disj: conj (OR conj)*
?conj: neg (AND neg)*
?neg: NOT neg                                -> not_
    | comparison
?comparison: sum (CMPOP sum)?
?sum: product (ADDOP product)*
?product: unary (MULOP unary)*
?unary: "-" unary                            -> neg_
      | atom
?atom: NUMBER                                -> number
     | PERCENT                               -> percent
     | STRING                                -> string
     | ref
     | agg
     | "[" NAME ("," NAME)* "]"              -> equiv
     | "(" cond ")"

ref: NAME "." NAME                           -> ref_single
   | NAME "[" index "]" "." NAME             -> ref_indexed
index: INT                                   -> idx_int
     | NAME                                  -> idx_name
     | NAME "-" INT                          -> idx_minus
     | NAME "." NAME                         -> idx_len
agg: NAME "(" aggarg ")"
aggarg: NAME "[" [RANGE index] "]" ["." NAME]    -> agg_kleene
      | NAME "." NAME                             -> agg_single
RANGE: ".."

OR.2: /(?i:or)\b/
AND.2: /(?i:and)\b/
NOT.2: /(?i:not)\b/
CMPOP: "<=" | ">=" | "<>" | "!=" | "==" | "=" | "<" | ">"
ADDOP: "+" | "-"
MULOP: "*" | "/"
PERCENT.3: /\d+(\.\d+)?%/
NUMBER: /\d+(\.\d+)?([eE][+-]?\d+)?/
INT: /\d+/
STRING: /'[^']*'/ | /"[^"]*"/
NAME: /[A-Za-z_][A-Za-z_0-9]*/
COMMENT: /\/\*(.|\n)*?\*\//
%ignore COMMENT
%import common.WS
%ignore WS
"""

STRATEGIES = ("strict_contiguity", "partition_contiguity", "skip_till_next_match", "skip_till_any_match")
_UNIT = {"ms": "ms", "millisecond": "ms", "milliseconds": "ms", "s": "s", "sec": "s", "secs": "s",
         "second": "s", "seconds": "s", "m": "min", "min": "min", "mins": "min", "minute": "min",
         "minutes": "min", "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "d": "d", "day": "d",
         "days": "d"}
_AGGS = ("avg", "sum", "count", "min", "max")
_CMP = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class SaseError(PatternError):
    """A SASE+ query that cannot be parsed or compiled; says where (line, column) or which
    predicate and reference."""


@lru_cache(maxsize=1)
def _parser():
    from lark import Lark
    return Lark(GRAMMAR, parser="lalr", propagate_positions=True)


@dataclass(frozen=True)
class SaseQuery(KeyedPattern):
    """A compiled SASE+ query: the Pattern, its key and how to run it. It stands for a Pattern
    anywhere (``colcep.match(data, query, time=...)``, ``Matcher(query)``, ``colcep.spark.match``)."""

    strategy: str = "skip_till_next_match"
    text: str = ""

    def match(self, data: Any, time: str, **kwargs: Any):
        """``colcep.match(data, self.pattern, key=self.key, time=time, ...)``; on a Spark
        DataFrame ``colcep.spark.match`` (same arguments, plus ``seq=`` etc.), a lazy DataFrame."""
        if _is_spark(data):
            from colcep.spark.batch import match as spark_match
            return spark_match(data, self.pattern, self.key, time, **kwargs)
        from colcep.engine.matcher import match
        return match(data, self.pattern, key=self.key, time=time, **kwargs)

    def matcher(self, time: str, **kwargs: Any):
        """A streaming :class:`~colcep.engine.matcher.Matcher` for the query."""
        from colcep.engine.matcher import Matcher
        return Matcher(self.pattern, key=self.key, time=time, **kwargs)


def _is_spark(data: Any) -> bool:
    return type(data).__module__.startswith("pyspark.")


# ============================================================================ the AST
@dataclass
class _Var:
    name: str
    type: str
    kind: str  # single | kleene | negated
    pos: int


@dataclass(frozen=True)
class _Ref:
    """``var.attr`` / ``var[idx].attr``; idx: None (plain), 1, "i", "i-1", "len"."""
    var: str
    idx: Any
    attr: str
    text: str


@dataclass(frozen=True)
class _Agg:
    func: str
    var: str
    rng: Any  # "..i-1" | "all"
    attr: str | None
    text: str


def _parse(text: str):
    from lark import Token, Tree
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        line, column = getattr(exc, "line", "?"), getattr(exc, "column", "?")
        ctx = exc.get_context(text).rstrip() if hasattr(exc, "get_context") and isinstance(line, int) else ""
        if isinstance(exc, UnexpectedToken):
            tok = "end of query" if exc.token.type == "$END" else repr(str(exc.token))
            exp = sorted(_pretty(t) for t in exc.expected)
            msg = f"unexpected {tok} at line {line}, column {column}; expected one of: {', '.join(exp[:12])}"
        elif isinstance(exc, UnexpectedCharacters):
            msg = f"unexpected character {text[exc.pos_in_stream]!r} at line {line}, column {column}"
        elif isinstance(exc, UnexpectedEOF):
            msg = "unexpected end of query"
        else:
            msg = str(exc)
        raise SaseError(f"SASE+ syntax error: {msg}\n{ctx}") from None
    return tree, Token, Tree


_PRETTY = {"LPAR": "'('", "RPAR": "')'", "COMMA": "','", "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['",
           "RSQB": "']'", "DOT": "'.'", "PLUS": "'+'", "TILDE": "'~'", "MINUS": "'-'", "NAME": "a name",
           "NUMBER": "a number", "INT": "an integer", "STRING": "a string", "PERCENT": "a percentage",
           "CMPOP": "a comparison", "STRATEGY": "a selection strategy", "UNIT": "a time unit", "WITHIN": "WITHIN",
           "WHERE": "WHERE", "SEQ": "SEQ", "PATTERN": "PATTERN"}


def _pretty(t: str) -> str:
    return _PRETTY.get(t, t)


# ============================================================================ compiling
def sase(text: str, type_column: str | None = None, key: "str | Sequence[str] | None" = None,
         skip: AfterMatchSkipStrategy | None = None) -> SaseQuery:
    """Compile a SASE+ query to a Pattern (see the module docstring for the language).

    ``type_column``: the column holding event types (``Shelf``, ``Exit``...); ``key``: match per
    this column or these columns (default: the ``[attr]`` equivalence attribute, if any;
    ``partition_contiguity`` adds its ``[attr]`` to the key); ``skip``: an after-match skip
    strategy (SASE+ has none in its syntax; default: every match).
    """
    if not isinstance(text, str):
        raise TypeError(f"sase() takes the query text, got {type(text).__name__}")
    keys = key_names(key)
    tree, Token, Tree = _parse(text)
    seq = tree.children[0]
    where = within = None
    for ch in tree.children[1:]:
        if isinstance(ch, Tree) and ch.data == "where":
            where = ch
        elif isinstance(ch, Tree) and ch.data == "within":
            within = ch

    # -- variables
    vars_: dict[str, _Var] = {}
    for i, comp in enumerate(seq.children):
        typ, name = str(comp.children[0]), str(comp.children[1])
        if name in vars_:
            raise SaseError(f"variable {name!r} is declared twice in SEQ(...)")
        vars_[name] = _Var(name, typ, {"single": "single", "kleene": "kleene", "negated": "negated"}[comp.data], i)
    order = list(vars_.values())
    if order[0].kind == "negated":
        raise SaseError(f"a query cannot start with a negated component (~({order[0].type} {order[0].name})): "
                        "there is no event before it to anchor the negation")
    for a, b in zip(order, order[1:]):
        if a.kind == "negated" and b.kind == "negated":
            raise SaseError(f"two negated components in a row (~({a.type} {a.name}), ~({b.type} {b.name})) are "
                            "not supported; put them in one negation with 'or'")
    types = {v.type for v in order}
    if type_column is None and len(types) > 1:
        raise SaseError(f"the query uses several event types ({', '.join(sorted(types))}): pass type_column= "
                        "naming the column that holds them")

    # -- strategy and predicates
    strategy = "skip_till_next_match"
    preds: list = []
    if where is not None:
        for ch in where.children:
            if isinstance(ch, Tree) and ch.data == "strategy":
                strategy = str(ch.children[0]).lower()
                for sv in ch.children[1:]:
                    if sv is None:
                        continue
                    nm = str(sv.children[0])
                    if nm not in vars_:
                        raise SaseError(f"{strategy}({nm}...): {nm!r} is not a variable of SEQ(...) "
                                        f"(variables: {', '.join(vars_)})")
            elif ch is not None:
                preds = _conjuncts(ch, Tree, Token)
    # -- equivalence tests
    equiv: list[str] = []
    rest = []
    for p in preds:
        if isinstance(p, Tree) and p.data == "equiv":
            equiv.extend(str(t) for t in p.children)
        else:
            rest.append(p)
    if _contains(rest, "equiv", Tree):
        raise SaseError("an equivalence test [attr] must stand on its own, joined to the other predicates by 'and'")
    equiv = list(dict.fromkeys(equiv))
    eq_conditions: list[str] = []
    if strategy == "partition_contiguity":
        # the partitions are the [attr] classes within each key: strict per (key..., attr...)
        if not equiv and not keys:
            raise SaseError("partition_contiguity needs a partition: an equivalence test [attr] in WHERE (or "
                            "key=attr); without one, use strict_contiguity")
        keys = keys + [a for a in equiv if a not in keys]
    elif strategy == "strict_contiguity":
        eq_conditions = equiv           # strict over the whole stream: not per key
    else:
        if not keys and equiv:
            keys = [equiv[0]]
        eq_conditions = [a for a in equiv if a not in keys]
    key = normalize_key(keys or None)

    # -- per-variable conditions
    cx = _Compiler(vars_, order, text)
    conds: dict[str, list[Expr]] = {v.name: [] for v in order}
    for p in rest:
        var, e = cx.predicate(p)
        conds[var].append(e)
    first_pos = order[0].name
    for attr in eq_conditions:
        for v in order[1:]:
            conds[v.name].append(col(attr) == first(attr, of=first_pos))

    # -- the pattern
    strict = strategy in ("strict_contiguity", "partition_contiguity")
    anym = strategy == "skip_till_any_match"
    p: Pattern | None = None
    for v in order:
        if p is None:
            p = Pattern.begin(v.name)
        elif v.kind == "negated":
            p = p.not_next(v.name) if strict else p.not_followed_by(v.name)
        else:
            p = p.next(v.name) if strict else (p.followed_by_any(v.name) if anym else p.followed_by(v.name))
        cond: Expr | None = None
        if type_column is not None:
            cond = col(type_column) == v.type
        for e in conds[v.name]:
            cond = e if cond is None else cond & e
        if cond is not None:
            p = p.where(cond)
        if v.kind == "kleene":
            p = p.one_or_more()
            if strict:
                p = p.consecutive()
            elif anym:
                p = p.allow_combinations()
    assert p is not None
    if within is not None:
        p = p.within(_window(within))
    if order[-1].kind == "negated" and within is None:
        raise SaseError(f"a query ending in a negation (~({order[-1].type} {order[-1].name})) needs WITHIN: the "
                        "negation holds until the window passes")
    if skip is not None:
        p = p.skip(skip)
    return SaseQuery(p, key, strategy, text)


def sase_match(data: Any, text: str, time: str, type_column: str | None = None,
               key: "str | Sequence[str] | None" = None,
               skip: AfterMatchSkipStrategy | None = None, **kwargs: Any):
    """Compile a SASE+ query and run it over ``data`` (``colcep.match``'s inputs and keyword
    arguments, e.g. ``columns=``): one row per matched event, stages named by the variables."""
    return sase(text, type_column=type_column, key=key, skip=skip).match(data, time=time, **kwargs)


def _window(within) -> "str | int":
    num = str(within.children[0])
    unit = within.children[1]
    if unit is None:
        if not re.fullmatch(r"\d+", num):
            raise SaseError(f"WITHIN {num}: a window without a unit is an integer in the time column's unit")
        return int(num)
    return f"{num}{_UNIT[str(unit).lower()]}"


def _conjuncts(node, Tree, Token) -> list:
    if isinstance(node, Tree) and node.data == "conj":
        return [c for c in node.children if not isinstance(c, Token)]
    return [node]


def _contains(nodes, data: str, Tree) -> bool:
    for n in nodes:
        if isinstance(n, Tree):
            if n.data == data or _contains(n.children, data, Tree):
                return True
    return False


class _Compiler:
    """Predicate trees to colcep expressions, one predicate at a time."""

    def __init__(self, vars_: dict, order: list, text: str):
        self.vars = vars_
        self.order = order
        self.text = text

    def _src(self, node) -> str:
        try:
            return " ".join(self.text[node.meta.start_pos:node.meta.end_pos].split())
        except Exception:  # noqa: BLE001 - a node without positions
            return str(node)

    # -- references ----------------------------------------------------------------
    def _refs(self, node, out: list) -> list:
        from lark import Tree
        if isinstance(node, Tree):
            if node.data in ("ref_single", "ref_indexed"):
                out.append(self._ref(node))
                return out
            if node.data == "agg":
                out.append(self._aggref(node))
                return out
            for c in node.children:
                self._refs(c, out)
        return out

    def _var(self, name: str, node) -> _Var:
        if name not in self.vars:
            raise SaseError(f"in {self._src(node)!r}: {name!r} is not a variable of SEQ(...) "
                            f"(variables: {', '.join(self.vars)})")
        return self.vars[name]

    def _ref(self, node) -> _Ref:
        src = self._src(node)
        if node.data == "ref_single":
            var, attr = str(node.children[0]), str(node.children[1])
            v = self._var(var, node)
            if v.kind == "kleene":
                raise SaseError(f"in {src!r}: {var} is a Kleene variable ({v.type}+ {var}[]): say which event, "
                                f"{var}[1], {var}[i], {var}[i-1] or {var}[{var}.LEN]")
            return _Ref(var, None, attr, src)
        var, idx, attr = str(node.children[0]), node.children[1], str(node.children[2])
        v = self._var(var, node)
        if v.kind != "kleene":
            raise SaseError(f"in {src!r}: {var} is not a Kleene variable; write {var}.{attr}")
        return _Ref(var, self._index(idx, var, src), attr, src)

    def _index(self, idx, var: str, src: str):
        k = idx.data
        if k == "idx_int":
            n = int(idx.children[0])
            if n != 1:
                raise SaseError(f"in {src!r}: only {var}[1], {var}[i], {var}[i-1] and {var}[{var}.LEN] are "
                                f"supported, not {var}[{n}]")
            return 1
        if k == "idx_name" and str(idx.children[0]) == "i":
            return "i"
        if k == "idx_minus" and str(idx.children[0]) == "i" and int(idx.children[1]) == 1:
            return "i-1"
        if k == "idx_len" and str(idx.children[0]) == var and str(idx.children[1]).upper() == "LEN":
            return "len"
        raise SaseError(f"in {src!r}: unsupported index; use {var}[1], {var}[i], {var}[i-1] or {var}[{var}.LEN]")

    def _aggref(self, node) -> _Agg:
        src = self._src(node)
        func = str(node.children[0]).lower()
        if func not in _AGGS:
            raise SaseError(f"in {src!r}: unknown function {str(node.children[0])!r} (aggregates: "
                            f"{', '.join(_AGGS)})")
        arg = node.children[1]
        if arg.data == "agg_single":
            var, attr = str(arg.children[0]), str(arg.children[1])
            v = self._var(var, node)
            if v.kind == "kleene":
                raise SaseError(f"in {src!r}: aggregate over {var}[..i-1].{attr} or {var}[].{attr}")
            return _Agg(func, var, "all", attr, src)
        var = str(arg.children[0])
        v = self._var(var, node)
        if v.kind != "kleene":
            raise SaseError(f"in {src!r}: {var} is not a Kleene variable; aggregates range over {var}[]")
        rng_tok, idx, attr = arg.children[1], arg.children[2], arg.children[3]
        if rng_tok is None and idx is None:
            rng = "all"
        else:
            i = self._index(idx, var, src)
            if i == "i-1":
                rng = "..i-1"
            elif i == "len":
                rng = "all"
            else:
                raise SaseError(f"in {src!r}: an aggregate ranges over {var}[..i-1], {var}[..{var}.LEN] or {var}[]")
        attr_s = None if attr is None else str(attr)
        if attr_s is None and func != "count":
            raise SaseError(f"in {src!r}: {func} needs an attribute, e.g. {func}({var}[..i-1].price)")
        return _Agg(func, var, rng, attr_s, src)

    # -- a predicate ---------------------------------------------------------------
    def predicate(self, node) -> tuple[str, Expr]:
        """(the variable the predicate belongs to, its condition on that variable's events)."""
        src = self._src(node)
        refs = self._refs(node, [])
        if not refs:
            raise SaseError(f"predicate {src!r} mentions no variable")
        target = max((self.vars[r.var] for r in refs), key=lambda v: v.pos)
        for r in refs:
            v = self.vars[r.var]
            if v.kind == "negated" and v is not target:
                raise SaseError(f"predicate {src!r}: the negated variable {v.name} can only be compared in its own "
                                "predicates (it is not part of a match)")
        mode = "all"
        if target.kind == "kleene":
            own = [r for r in refs if r.var == target.name]
            if any(isinstance(r, _Ref) and r.idx == "len" for r in own):
                raise SaseError(f"predicate {src!r}: {target.name}[{target.name}.LEN] is the last event of "
                                f"{target.name}, known only after it; compare {target.name}[i] with "
                                f"{target.name}[i-1] instead")
            if any(isinstance(r, _Agg) and r.rng == "all" for r in own):
                raise SaseError(f"predicate {src!r}: an aggregate over all of {target.name}[] is known only after "
                                f"{target.name}; use {target.name}[..i-1] in its own predicates")
            current_i = any(isinstance(r, _Ref) and r.idx == "i" for r in own)
            history = any((isinstance(r, _Ref) and (r.idx == "i-1" or (r.idx == 1 and current_i)))
                          or isinstance(r, _Agg) for r in own)
            if history:
                mode = "rest"
            elif not current_i:
                mode = "first"       # only v[1]: a predicate on the first event
        e = self._expr(node, target, mode)
        if mode != "all":       # the variable's other events are not constrained by it
            n = count(of=target.name)
            e = ((n > 0) | e) if mode == "first" else ((n == 0) | e)
        return target.name, e

    def _expr(self, node, target: _Var, mode: str) -> Expr:
        from lark import Token
        if isinstance(node, Token):
            raise SaseError(f"unexpected {str(node)!r}")
        k = node.data
        ch = [c for c in node.children]
        if k == "number":
            return lit(float(ch[0]))
        if k == "percent":
            return lit(float(str(ch[0])[:-1]) / 100.0)
        if k == "string":
            return lit(str(ch[0])[1:-1])
        if k == "neg_":
            return -self._expr(ch[0], target, mode)
        if k == "not_":
            return ~self._expr(ch[1], target, mode)
        if k in ("disj", "conj"):
            parts = [self._expr(c, target, mode) for c in ch if not isinstance(c, Token)]
            out = parts[0]
            for x in parts[1:]:
                out = (out | x) if k == "disj" else (out & x)
            return out
        if k in ("sum", "product"):
            out = self._expr(ch[0], target, mode)
            for op, rhs in zip(ch[1::2], ch[2::2]):
                r = self._expr(rhs, target, mode)
                out = {"+": out.__add__, "-": out.__sub__, "*": out.__mul__, "/": out.__truediv__}[str(op)](r)
            return out
        if k == "comparison":
            a, op, b = self._expr(ch[0], target, mode), _CMP[str(ch[1])], self._expr(ch[2], target, mode)
            return Expr("cmp", (op, a, b))
        if k == "equiv":
            raise SaseError(f"an equivalence test {self._src(node)!r} must stand on its own, joined by 'and'")
        if k in ("ref_single", "ref_indexed"):
            return self._value(self._ref(node), target, mode)
        if k == "agg":
            a = self._aggref(node)
            if a.var == target.name and a.rng != "..i-1":
                raise SaseError(f"in {a.text!r}: aggregate over {a.var}[..i-1] in {a.var}'s own predicates")
            if a.var != target.name and a.rng == "..i-1":
                raise SaseError(f"in {a.text!r}: i is the index of the current variable ({target.name}); "
                                f"aggregate over all of {a.var} with {a.var}[]")
            return _make_agg(a.func, a.attr, (a.var,))
        raise SaseError(f"unsupported expression {self._src(node)!r}")

    def _value(self, r: _Ref, target: _Var, mode: str) -> Expr:
        if r.var == target.name:
            if r.idx in (None, "i"):
                return col(r.attr)
            if r.idx == 1:
                return col(r.attr) if mode == "first" else first(r.attr, of=r.var)
            if r.idx == "i-1":
                return last(r.attr, of=r.var)
            raise SaseError(f"in {r.text!r}: unsupported reference")  # len: refused above
        v = self.vars[r.var]
        if r.idx in ("i", "i-1"):
            raise SaseError(f"in {r.text!r}: i is the index of the current variable ({target.name}); from a later "
                            f"variable refer to {r.var}[1] or {r.var}[{r.var}.LEN]")
        if v.kind == "kleene" and r.idx == 1:
            return first(r.attr, of=r.var)
        return last(r.attr, of=r.var)        # a one-event variable, or v[v.LEN]


__all__ = ["sase", "sase_match", "SaseQuery", "SaseError", "STRATEGIES", "GRAMMAR"]
