"""A plain-Python reference of SQL:2016 row pattern recognition (MATCH_RECOGNIZE), as Trino
documents and runs it: the ground truth the standard-mode kernel (issue 28) is to be checked
against on small inputs. Backtracking in preferment order, so exponential in the worst case.

    rows = reference(query, columns, data)      # list of output tuples, or raises StdError

What it implements (Trino's docs/src/main/sphinx/sql/match-recognize.md):
- PATTERN: concatenation, alternation (left preferred), PERMUTE (lexicographic preference),
  grouping, ``^`` / ``$`` anchors, the empty pattern ``()``, exclusions ``{- ... -}``, the
  quantifiers ``* + ? {n} {n,} {,m} {n,m}``, greedy or reluctant (``?`` after), compiled as
  Trino compiles them (a bounded one unrolled, an unbounded one a loop) and searched depth first,
  a path that comes back to an instruction at the same row without consuming one being cut;
- the preferred match from each start row is the first one found in preferment order; empty
  matches are matches (numbered, shown by ONE ROW and ALL ROWS [SHOW EMPTY MATCHES]);
- ONE ROW PER MATCH (default), ALL ROWS PER MATCH [SHOW EMPTY MATCHES | OMIT EMPTY MATCHES |
  WITH UNMATCHED ROWS]; AFTER MATCH SKIP PAST LAST ROW (default) | TO NEXT ROW | TO [FIRST |
  LAST] v (the errors for skipping to the match's first row or to an absent variable);
- SUBSET union variables; DEFINE (undefined variables are true), evaluated with the candidate
  row labelled; expressions: column references prefixed by a variable (its last row, running)
  or not (the universal variable), PREV / NEXT (physical), FIRST / LAST (logical), nested
  ``PREV(LAST(A.x, 1), 2)``, RUNNING / FINAL, aggregates (count, sum, avg, min, max, max_by,
  min_by, array_agg) over a variable's rows, CLASSIFIER([v]), MATCH_NUMBER(), arithmetic,
  comparisons, AND / OR / NOT with SQL's three-valued logic, CASE, COALESCE, IS [NOT] NULL,
  BETWEEN, IN, ``||``, ABS.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import sqlglot
from sqlglot import exp

__all__ = ["reference", "StdError"]


class StdError(Exception):
    """A query the standard refuses, or a run that fails (e.g. AFTER MATCH SKIP TO a missing row)."""


class TooLong(Exception):
    """The search went past its step budget (the backtracking is exponential on nested quantifiers)."""


# ====================================================================== clauses
_CLAUSES = [("PARTITION", r"PARTITION\s+BY"), ("ORDER", r"ORDER\s+BY"), ("MEASURES", r"MEASURES"),
            ("ROWS", r"(?:ONE\s+ROW|ALL\s+ROWS)\s+PER\s+MATCH"), ("SKIP", r"AFTER\s+MATCH\s+SKIP"),
            ("PATTERN", r"PATTERN"), ("SUBSET", r"SUBSET"), ("DEFINE", r"DEFINE")]


def _depth0(text: str) -> list[bool]:
    """Per character: outside parentheses, brackets and quotes."""
    out, depth, quote = [], 0, None
    for ch in text:
        if quote:
            out.append(False)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
            out.append(False)
            continue
        if ch in "([":
            depth += 1
        out.append(depth == 0 and ch not in ")]")
        if ch in ")]":
            depth -= 1
    return out


def _split_top(text: str, sep: str = ",") -> list[str]:
    top = _depth0(text)
    parts, start = [], 0
    for i, ch in enumerate(text):
        if ch == sep and top[i]:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + ([last] if last else [])


@dataclass
class Query:
    select: list[tuple[str, str]]       # (source column, output name); [] means *
    partition: list[str]
    order: list[tuple[str, bool]]       # (column, descending)
    measures: list[tuple[str, Any]]     # (name, expression)
    rows: str                           # one | all | all_omit | all_unmatched
    skip: tuple                         # ("past",) | ("next",) | ("first"|"last", var)
    pattern: Any
    subsets: dict[str, set[str]]
    define: dict[str, Any]
    variables: list[str] = field(default_factory=list)


def parse(query: str) -> Query:
    query = re.sub(r"/\*.*?\*/", " ", query, flags=re.S)
    query = re.sub(r"--[^\n]*", " ", query)
    m = re.search(r"MATCH_RECOGNIZE\s*\(", query, re.I)
    if not m:
        raise StdError("no MATCH_RECOGNIZE clause")
    depth, i = 1, m.end()
    while depth:
        if i >= len(query):
            raise StdError("unbalanced parentheses in MATCH_RECOGNIZE")
        depth += {"(": 1, ")": -1}.get(query[i], 0)
        i += 1
    body = query[m.end():i - 1]
    sel = re.match(r"\s*SELECT\s+(.*?)\s+FROM\s", query, re.I | re.S)
    select = _select_list(sel.group(1)) if sel else []
    top = _depth0(body)
    found = []
    for name, rx in _CLAUSES:
        for mm in re.finditer(r"\b" + rx + r"\b", body, re.I):
            if top[mm.start()]:
                found.append((mm.start(), mm.end(), name, mm.group(0)))
                break
    found.sort()
    parts = {}
    for k, (s, e, name, head) in enumerate(found):
        end = found[k + 1][0] if k + 1 < len(found) else len(body)
        parts[name] = (head, body[e:end].strip())
    q = Query(select, [], [], [], "one", ("past",), None, {}, {})
    if "PARTITION" in parts:
        q.partition = [c.strip() for c in _split_top(parts["PARTITION"][1])]
    if "ORDER" in parts:
        for c in _split_top(parts["ORDER"][1]):
            w = c.split()
            q.order.append((w[0], len(w) > 1 and w[1].upper() == "DESC"))
    if "ROWS" in parts:
        head, rest = parts["ROWS"]
        if head.upper().startswith("ALL"):
            r = " ".join(rest.upper().split())
            q.rows = {"": "all", "SHOW EMPTY MATCHES": "all", "OMIT EMPTY MATCHES": "all_omit",
                      "WITH UNMATCHED ROWS": "all_unmatched"}[r]
    if "SKIP" in parts:
        w = parts["SKIP"][1].split()
        u = [x.upper() for x in w]
        if u[:2] == ["PAST", "LAST"]:
            q.skip = ("past",)
        elif u[:2] == ["TO", "NEXT"]:
            q.skip = ("next",)
        elif u[:2] in (["TO", "FIRST"], ["TO", "LAST"]):
            q.skip = (u[1].lower(), _ident(w[2]))
        else:
            q.skip = ("last", _ident(w[1]))
    if "SUBSET" in parts:
        for s in _split_top(parts["SUBSET"][1]):
            name, members = s.split("=", 1)
            q.subsets[_ident(name.strip())] = {_ident(x) for x in _split_top(members.strip()[1:-1])}
    text = parts["PATTERN"][1].strip()
    q.pattern = PatternParser(text[1:-1]).parse()
    q.variables = sorted(_pattern_vars(q.pattern))
    if "DEFINE" in parts:
        for d in _split_top(parts["DEFINE"][1]):
            mm = re.match(r"\s*(\"[^\"]+\"|\w+)\s+AS\s+(.*)$", d, re.I | re.S)
            q.define[_ident(mm.group(1))] = _expr(mm.group(2))
    if "MEASURES" in parts:
        for d in _split_top(parts["MEASURES"][1]):
            mm = re.match(r"(.*)\s+AS\s+(\"[^\"]+\"|\w+)\s*$", d, re.I | re.S)
            q.measures.append((_ident(mm.group(2)).lower(), _expr(mm.group(1))))
    if q.rows == "all_unmatched" and _has_exclusion(q.pattern):
        raise StdError("Pattern exclusion syntax is not allowed when ALL ROWS PER MATCH WITH UNMATCHED ROWS is specified")
    return q


def _table_var(col: exp.Column) -> str:
    """The pattern variable prefixing a column: a quoted one keeps its case."""
    t = col.args["table"]
    return t.name if getattr(t, "quoted", False) else t.name.upper()


def _ident(s: str) -> str:
    """A pattern variable: quoted names keep their case, others are upper-cased."""
    s = s.strip()
    return s[1:-1] if s.startswith('"') else s.upper()


def _select_list(text: str) -> list[tuple[str, str]]:
    if text.strip() == "*":
        return []
    out = []
    for item in _split_top(text):
        item = re.sub(r"^CAST\s*\((.*)\s+AS\s+[\w() ,]+\)(?=\s+AS\s|\s*$)", r"\1", item.strip(), flags=re.I)
        mm = re.match(r"(?:\w+\.)?(\w+)(?:\s+AS\s+(\w+))?\s*$", item.strip(), re.I)
        if not mm:
            raise StdError(f"select item not understood by the reference: {item!r}")
        out.append((mm.group(1).lower(), (mm.group(2) or mm.group(1)).lower()))
    return out


def _expr(text: str):
    text = re.sub(r"\b(RUNNING|FINAL)\s+(\w+)\s*\(", lambda m: f"__{m.group(1).lower()}_{m.group(2).lower()}(", text,
                  flags=re.I)
    text = re.sub(r"\b(\"[^\"]+\"|\w+)\.\*", lambda m: f"__allrows({m.group(1)})", text)
    return sqlglot.parse_one("SELECT " + text, read="trino").expressions[0]


# ====================================================================== PATTERN
@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Seq:
    parts: tuple


@dataclass(frozen=True)
class Alt:
    parts: tuple


@dataclass(frozen=True)
class Rep:
    node: Any
    lo: int
    hi: int | None
    greedy: bool


@dataclass(frozen=True)
class Anchor:
    end: bool


@dataclass(frozen=True)
class Excl:
    node: Any


@dataclass(frozen=True)
class Perm:
    parts: tuple


class PatternParser:
    TOKEN = re.compile(r"\s*(\{-|-\}|\{\s*\d*\s*(?:,\s*\d*\s*)?\}|PERMUTE\b|\"[^\"]+\"|[A-Za-z_]\w*|[()|^$*+?,])", re.I)

    def __init__(self, text: str):
        self.toks = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = self.TOKEN.match(text, pos)
            if not m:
                raise StdError(f"bad row pattern at {text[pos:]!r}")
            self.toks.append(m.group(1))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, t=None):
        tok = self.peek()
        if t is not None and (tok is None or tok.upper() != t):
            raise StdError(f"expected {t} in row pattern, got {tok!r}")
        self.i += 1
        return tok

    def parse(self):
        node = self.alt()
        if self.peek() is not None:
            raise StdError(f"unexpected {self.peek()!r} in row pattern")
        return node

    def alt(self):
        parts = [self.seq()]
        while self.peek() == "|":
            self.take()
            parts.append(self.seq())
        return parts[0] if len(parts) == 1 else Alt(tuple(parts))

    def seq(self):
        parts = []
        while self.peek() not in (None, "|", ")", "-}", ","):
            parts.append(self.term())
        return Seq(tuple(parts))

    def term(self):
        node = self.primary()
        while True:
            t = self.peek()
            if t in ("*", "+", "?") or (t and t.startswith("{") and t != "{-"):
                self.take()
                if t == "*":
                    lo, hi = 0, None
                elif t == "+":
                    lo, hi = 1, None
                elif t == "?":
                    lo, hi = 0, 1
                else:
                    inner = t[1:-1].replace(" ", "")
                    if "," not in inner:
                        lo = hi = int(inner)
                    else:
                        a, b = inner.split(",")
                        lo, hi = int(a or 0), (int(b) if b else None)
                greedy = True
                if self.peek() == "?":
                    self.take()
                    greedy = False
                node = Rep(node, lo, hi, greedy)
            else:
                return node

    def primary(self):
        t = self.take()
        if t == "(":
            if self.peek() == ")":
                self.take()
                return Seq(())
            node = self.alt()
            self.take(")")
            return node
        if t == "{-":
            node = self.alt()
            self.take("-}")
            return Excl(node)
        if t in ("^", "$"):
            return Anchor(t == "$")
        if t.upper() == "PERMUTE":
            self.take("(")
            parts = [self.alt()]
            while self.peek() == ",":
                self.take()
                parts.append(self.alt())
            self.take(")")
            return Perm(tuple(parts))
        return Var(_ident(t))


def _pattern_vars(node) -> set[str]:
    if isinstance(node, Var):
        return {node.name}
    if isinstance(node, (Rep, Excl)):
        return _pattern_vars(node.node)
    if isinstance(node, (Seq, Alt, Perm)):
        return set().union(*(_pattern_vars(p) for p in node.parts)) if node.parts else set()
    return set()


def _has_exclusion(node) -> bool:
    if isinstance(node, Excl):
        return True
    if isinstance(node, Rep):
        return _has_exclusion(node.node)
    if isinstance(node, (Seq, Alt, Perm)):
        return any(_has_exclusion(p) for p in node.parts)
    return False


# ====================================================================== matching
@dataclass(frozen=True)
class Label:
    pos: int
    var: str
    excluded: bool


# ====================================================================== the program
CONSUME, SPLIT, JMP, ASSERT_START, ASSERT_END, MATCH = range(6)


@dataclass
class Ins:
    op: int
    var: str = ""
    excl: bool = False
    x: int = 0
    y: int = 0


def compile_pattern(node) -> list[Ins]:
    prog: list[Ins] = []

    def emit(ins: Ins) -> int:
        prog.append(ins)
        return len(prog) - 1

    def gen(n, excl: bool) -> None:
        if isinstance(n, Var):
            emit(Ins(CONSUME, n.name, excl))
        elif isinstance(n, Seq):
            for p in n.parts:
                gen(p, excl)
        elif isinstance(n, Perm):
            gen(Alt(tuple(Seq(o) for o in itertools.permutations(n.parts))), excl)
        elif isinstance(n, Alt):
            jumps = []
            for k, p in enumerate(n.parts):
                if k < len(n.parts) - 1:
                    s = emit(Ins(SPLIT))
                    prog[s].x = len(prog)
                    gen(p, excl)
                    jumps.append(emit(Ins(JMP)))
                    prog[s].y = len(prog)
                else:
                    gen(p, excl)
            for j in jumps:
                prog[j].x = len(prog)
        elif isinstance(n, Anchor):
            emit(Ins(ASSERT_END if n.end else ASSERT_START))
        elif isinstance(n, Excl):
            gen(n.node, True)
        elif isinstance(n, Rep):
            for _ in range(n.lo):
                gen(n.node, excl)
            if n.hi is None:  # L: split(body, out) ; body ; jmp L
                s = emit(Ins(SPLIT))
                body = len(prog)
                gen(n.node, excl)
                emit(Ins(JMP, x=s))
                prog[s].x, prog[s].y = (body, len(prog)) if n.greedy else (len(prog), body)
            else:  # (body (body (...)?)?)?: each optional copy splits to the common exit
                splits = []
                for _ in range(n.hi - n.lo):
                    s = emit(Ins(SPLIT))
                    splits.append(s)
                    prog[s].x = len(prog)
                    gen(n.node, excl)
                out = len(prog)
                for s in splits:
                    body = prog[s].x
                    prog[s].x, prog[s].y = (body, out) if n.greedy else (out, body)
        else:
            raise TypeError(n)

    gen(node, False)
    emit(Ins(MATCH))
    return prog


class Matcher:
    """The preferred match from a start row: the first success of a depth-first search over the
    compiled pattern (``compile_pattern``), each split's preferred branch first. A path that comes
    back to an instruction it passed at the same row without consuming one is cut: this is what
    Trino's matcher does (it kills a thread equal to one already at that instruction and row), and
    it is the standard's rule that a quantified pattern does not loop on empty iterations."""

    def __init__(self, q: Query, rows: list[dict], number: int, budget: int | None = None):
        self.q, self.rows, self.n, self.number = q, rows, len(rows), number
        self.prog = compile_pattern(q.pattern)
        self.budget = budget

    def find(self, start: int) -> tuple[int, tuple] | None:
        """The preferred match from ``start``: (end, labels), or None."""
        return next(self.run(0, start, (), frozenset()), None)

    def accepts(self, var: str, cand: tuple) -> bool:
        cond = self.q.define.get(var)
        return cond is None or _truth(Eval(self, cand, len(cand) - 1, final=False).ev(cond))

    def run(self, pc: int, i: int, labels: tuple, passed: frozenset) -> Iterator[tuple[int, tuple]]:
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise TooLong()
        ins = self.prog[pc]
        if ins.op == MATCH:
            yield i, labels
        elif ins.op == CONSUME:
            if i < self.n:
                cand = labels + (Label(i, ins.var, ins.excl),)
                if self.accepts(ins.var, cand):
                    yield from self.run(pc + 1, i + 1, cand, frozenset())
        elif pc not in passed:
            passed = passed | {pc}
            if ins.op == SPLIT:
                yield from self.run(ins.x, i, labels, passed)
                yield from self.run(ins.y, i, labels, passed)
            elif ins.op == JMP:
                yield from self.run(ins.x, i, labels, passed)
            elif (i == 0) if ins.op == ASSERT_START else (i == self.n):
                yield from self.run(pc + 1, i, labels, passed)


# ====================================================================== expressions
def _truth(v) -> bool:
    return v is True


class Eval:
    """Evaluates an expression for a match: ``labels`` the match's rows, ``cur`` the index (in
    ``labels``) of the row the evaluation stands on (running semantics see labels[:cur + 1])."""

    def __init__(self, matcher: Matcher, labels: tuple, cur: int, final: bool):
        self.mt, self.labels, self.cur, self.final = matcher, labels, cur, final
        self.rows = matcher.rows

    def visible(self, final: bool | None = None) -> tuple:
        f = self.final if final is None else final
        return self.labels if f else self.labels[:self.cur + 1]

    def var_rows(self, var: str | None, final: bool | None = None) -> list[int]:
        members = None if var is None else self.mt.q.subsets.get(var, {var})
        return [lb.pos for lb in self.visible(final) if members is None or lb.var in members]

    def label_of(self, pos: int) -> str | None:
        for lb in self.labels:
            if lb.pos == pos:
                return lb.var
        return None

    # ---- the variable an expression refers to (consistent within a navigation or aggregate)
    def ref_var(self, node) -> str | None:
        found = set()
        for c in node.find_all(exp.Column):
            if c.table:
                found.add(_table_var(c))
        for f in node.find_all(exp.Anonymous):
            if f.name.upper() in ("CLASSIFIER", "__ALLROWS") and f.expressions:
                found.add(_ident(f.expressions[0].sql()))
        if len(found) > 1:
            raise StdError(f"inconsistent pattern variable references: {sorted(found)}")
        return next(iter(found), None)

    def ev(self, node, at: int | None = None):
        """Value of ``node``; ``at``: column references read that row (inside a navigation)."""
        if isinstance(node, exp.Paren):
            return self.ev(node.this, at)
        if isinstance(node, exp.Alias):
            return self.ev(node.this, at)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            v = float(node.this)
            return int(v) if re.fullmatch(r"-?\d+", node.this) else v
        if isinstance(node, exp.Boolean):
            return node.this
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Column):
            if at is None:
                var = _table_var(node) if node.table else None
                rows = self.var_rows(var)
                if not rows:
                    return None
                at = rows[-1]
            return self.rows[at].get(node.name.lower())
        if isinstance(node, exp.Neg):
            v = self.ev(node.this, at)
            return None if v is None else -v
        if isinstance(node, exp.Not):
            v = self.ev(node.this, at)
            return None if v is None else not v
        if isinstance(node, exp.And):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is False or b is False:
                return False
            return None if a is None or b is None else True
        if isinstance(node, exp.Or):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is True or b is True:
                return True
            return None if a is None or b is None else False
        if isinstance(node, exp.Is):
            v = self.ev(node.this, at)
            return v is None
        if isinstance(node, exp.Between):
            v, lo, hi = self.ev(node.this, at), self.ev(node.args["low"], at), self.ev(node.args["high"], at)
            return None if None in (v, lo, hi) else lo <= v <= hi
        if isinstance(node, exp.In):
            v = self.ev(node.this, at)
            vals = [self.ev(x, at) for x in node.expressions]
            return None if v is None else v in vals
        if isinstance(node, exp.DPipe):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            return None if a is None or b is None else f"{a}{b}"
        if isinstance(node, exp.Binary):
            a, b = self.ev(node.left, at), self.ev(node.right, at)
            if a is None or b is None:
                return None
            return _binary(node, a, b)
        if isinstance(node, exp.Case):
            for w in node.args.get("ifs", []):
                if _truth(self.ev(w.this, at)):
                    return self.ev(w.args["true"], at)
            d = node.args.get("default")
            return None if d is None else self.ev(d, at)
        if isinstance(node, exp.Coalesce):
            for x in [node.this, *node.expressions]:
                v = self.ev(x, at)
                if v is not None:
                    return v
            return None
        if isinstance(node, exp.Abs):
            v = self.ev(node.this, at)
            return None if v is None else abs(v)
        if isinstance(node, exp.Cast):
            return self.ev(node.this, at)
        if isinstance(node, (exp.Lower, exp.Upper)):
            v = self.ev(node.this, at)
            return None if v is None else (v.lower() if isinstance(node, exp.Lower) else v.upper())
        if isinstance(node, exp.Array):
            return [self.ev(x, at) for x in node.expressions]
        if isinstance(node, exp.ConcatWs):
            vals = [self.ev(x, at) for x in node.expressions]
            flat = [x for v in vals[1:] for x in (v if isinstance(v, list) else [v])]  # an array joins its elements
            sep, rest = vals[0], [v for v in flat if v is not None]
            return None if sep is None else sep.join(str(v) for v in rest)
        return self.func(node, at)

    def func(self, node, at):
        name, args, final = _call(node)
        if name == "MATCH_NUMBER":
            return self.mt.number
        if name == "CLASSIFIER":
            var = _ident(args[0].sql()) if args else None
            if at is None:
                rows = self.var_rows(var)
                if not rows:
                    return None
                at = rows[-1]
            return self.label_of(at)
        if name in ("PREV", "NEXT"):
            inner = args[0]
            n = 1 if len(args) < 2 else int(self.ev(args[1]))
            if n < 0:
                raise StdError("navigation offset must not be negative")
            iname = _call(inner)[0] if _is_call(inner) else None
            if iname in ("FIRST", "LAST"):
                base, expr_ = self.logical(inner)
            else:
                rows = self.var_rows(self.ref_var(inner))
                base, expr_ = (rows[-1] if rows else None), inner
            if base is None:
                return None
            target = base - n if name == "PREV" else base + n
            if not 0 <= target < len(self.rows):
                return None
            return self.ev(expr_, target)
        if name in ("FIRST", "LAST"):
            row, expr_ = self.logical(node)
            return None if row is None else self.ev(expr_, row)
        if name in _AGGS:
            return self.aggregate(name, args, final)
        raise StdError(f"function {name} not in the reference")

    def logical(self, node) -> tuple[int | None, Any]:
        name, args, final = _call(node)
        n = 0 if len(args) < 2 else int(self.ev(args[1]))
        if n < 0:
            raise StdError("navigation offset must not be negative")
        # FIRST counts from the match's first row and may reach past the current one (Trino: FIRST(x, 2)
        # in ALL ROWS PER MATCH is the third row's on every row); LAST counts back from the current
        rows = self.var_rows(self.ref_var(args[0]), True if name == "FIRST" else final)
        k = n if name == "FIRST" else len(rows) - 1 - n
        return (rows[k] if 0 <= k < len(rows) else None), args[0]

    def aggregate(self, name, args, final):
        allrows = bool(args) and _is_call(args[0]) and _call(args[0])[0] == "__ALLROWS"
        var = _ident(args[0].expressions[0].sql()) if allrows else (
            self.ref_var(exp.Tuple(expressions=[a.copy() for a in args])) if args else None)
        rows = self.var_rows(var, final)
        if name == "COUNT":
            if not args or allrows or isinstance(args[0], exp.Star):
                return len(rows)
            return sum(self.ev(args[0], r) is not None for r in rows)
        vals = [self.ev(args[0], r) for r in rows]
        if name == "ARRAY_AGG":
            return vals
        if name in ("ANY_VALUE", "ARBITRARY"):
            return next((v for v in vals if v is not None), None)
        if name in ("MAX_BY", "MIN_BY"):
            keyed = [(self.ev(args[1], r), v) for r, v in zip(rows, vals)]
            keyed = [kv for kv in keyed if kv[0] is not None]
            if not keyed:
                return None
            pick = max if name == "MAX_BY" else min
            return pick(keyed, key=lambda kv: kv[0])[1]
        vals = [v for v in vals if v is not None]
        if not vals:
            return None
        if name == "SUM":
            return sum(vals)
        if name == "AVG":
            return sum(vals) / len(vals)
        return (max if name == "MAX" else min)(vals)


_AGGS = {"COUNT", "SUM", "AVG", "MIN", "MAX", "MAX_BY", "MIN_BY", "ARRAY_AGG", "ANY_VALUE", "ARBITRARY"}


def _is_call(node) -> bool:
    return isinstance(node, exp.Func)


def _call(node) -> tuple[str, list, bool | None]:
    """(upper-case name, arguments, final: True / False / None for the default) of a call."""
    if isinstance(node, exp.Anonymous):
        name, args = node.name.upper(), list(node.expressions)
    else:
        name = node.sql_name().upper() if hasattr(node, "sql_name") else type(node).__name__.upper()
        args = [a for a in [node.this, *(node.args.get("expressions") or [])] if a is not None]
        extra = node.args.get("expression")
        if extra is not None and extra not in args:
            args.append(extra)
        name = {"ARRAYAGG": "ARRAY_AGG", "ARGMAX": "MAX_BY", "ARGMIN": "MIN_BY", "ARG_MAX": "MAX_BY",
                "ARG_MIN": "MIN_BY"}.get(name, name)
    final = None
    m = re.fullmatch(r"__(RUNNING|FINAL)_(\w+)", name)
    if m:
        final, name = m.group(1) == "FINAL", m.group(2).upper()
    return name, args, final


def _binary(node, a, b):
    if isinstance(node, exp.Add):
        return a + b
    if isinstance(node, exp.Sub):
        return a - b
    if isinstance(node, exp.Mul):
        return a * b
    if isinstance(node, exp.Div):
        if b == 0:
            raise StdError("Division by zero")
        return a // b if isinstance(a, int) and isinstance(b, int) and a * b >= 0 else (
            int(a / b) if isinstance(a, int) and isinstance(b, int) else a / b)
    if isinstance(node, exp.Mod):
        return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else int(math.fmod(a, b))
    ops = {exp.EQ: lambda: a == b, exp.NEQ: lambda: a != b, exp.GT: lambda: a > b, exp.GTE: lambda: a >= b,
           exp.LT: lambda: a < b, exp.LTE: lambda: a <= b}
    for k, f in ops.items():
        if isinstance(node, k):
            return f()
    raise StdError(f"operator {type(node).__name__} not in the reference")


# ====================================================================== the run
def reference(query: str, columns: list[str], data: list[list], matcher: Any = None) -> list[tuple]:
    """The output rows of ``query`` over the table ``data`` (rows of ``columns``); ``matcher``: the
    class that finds a match (default ``Matcher``; ``sqlstd_threads.ThreadMatcher`` takes its place)."""
    q = parse(query)
    cols = [c.lower() for c in columns]
    table = [dict(zip(cols, r)) for r in data]
    groups: dict[tuple, list[dict]] = {}
    for r in table:
        groups.setdefault(tuple(r[c.lower()] for c in q.partition), []).append(r)
    out: list[list] = []
    for rows in groups.values():
        for c, desc in reversed(q.order):
            rows = sorted(rows, key=lambda r: (r[c.lower()] is None, r[c.lower()]), reverse=desc)
        out.extend(_partition(q, rows, cols, matcher or Matcher))
    if not q.select:
        return [tuple(v for _, v in r) for r in out]
    return [tuple(dict(reversed(r)).get(src) for src, _ in q.select) for r in out]


def _partition(q: Query, rows: list[dict], cols: list[str], matcher: Any) -> list[list]:
    out: list[list] = []
    number = 0
    s = 0
    n = len(rows)
    part_cols = [c.lower() for c in q.partition]
    order_cols = [c.lower() for c, _ in q.order]
    rest = [c for c in cols if c not in part_cols and c not in order_cols]
    measured: set[int] = set()

    def row_out(base: dict, meas: dict) -> list:
        """The output row as (name, value) pairs, in Trino's layout (an ORDER BY column listed twice
        comes out twice)."""
        r = [(c, base.get(c)) for c in part_cols]
        if q.rows != "one":
            r += [(c, base.get(c)) for c in order_cols]
        r += list(meas.items())
        if q.rows != "one":
            r += [(c, base.get(c)) for c in rest]
        return r

    while s < n:
        number += 1
        mt = matcher(q, rows, number)
        found = mt.find(s)
        if found is None:
            number -= 1
            if q.rows == "all_unmatched" and s not in measured:
                out.append(row_out(rows[s], {name: None for name, _ in q.measures}))
            s += 1
            continue
        end, labels = found
        if not labels:  # an empty match
            meas = {name: Eval(mt, (), -1, final=True).ev(e) for name, e in q.measures}
            if q.rows != "all_omit":
                out.append(row_out(rows[s], meas))
            s += 1
            continue
        if q.rows == "one":
            out.append(row_out(rows[s], {name: Eval(mt, labels, len(labels) - 1, final=_final(e)).ev(e)
                                         for name, e in q.measures}))
        else:
            for k, lb in enumerate(labels):
                measured.add(lb.pos)
                if lb.excluded:
                    continue
                ev = Eval(mt, labels, k, final=False)
                out.append(row_out(rows[lb.pos], {name: ev.ev(e) for name, e in q.measures}))
        s = _skip(q, s, end, labels)
    return out


def _final(e) -> bool:
    return True  # ONE ROW PER MATCH: evaluated from the match's last row, running = final


def _skip(q: Query, start: int, end: int, labels: tuple) -> int:
    kind = q.skip[0]
    if kind == "past":
        return end
    if kind == "next":
        return start + 1
    var = q.skip[1]
    members = q.subsets.get(var, {var})
    pos = [lb.pos for lb in labels if lb.var in members]
    if not pos:
        raise StdError(f"AFTER MATCH SKIP failed: pattern variable is not present in match")
    target = pos[0] if kind == "first" else pos[-1]
    if target == start:
        raise StdError("AFTER MATCH SKIP failed: cannot skip to first row of match")
    return target
