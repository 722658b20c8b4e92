"""The standard mode's syntax (SQL:2016 MATCH_RECOGNIZE as Trino parses it): the query's clauses,
the row pattern as a tree, and the pattern compiled to the program the matcher runs.

The clauses are split at the top level by keyword (sqlglot's MATCH_RECOGNIZE grammar has no
SUBSET, exclusions or anchors); expressions are parsed by sqlglot's Trino dialect, with
``RUNNING f(...)`` / ``FINAL f(...)`` rewritten to ``__running_f(...)`` / ``__final_f(...)`` and
``v.*`` to ``__allrows(v)``.

The program is Trino's: a variable is ``CONSUME v``; alternation ``SPLIT`` (the left branch
preferred) and ``JMP``; a bounded quantifier unrolled, an unbounded one a loop whose ``SPLIT``
prefers the body when greedy and the exit when reluctant; ``PERMUTE`` the alternation of every
order, in lexicographic order; anchors ``ASSERT_START`` / ``ASSERT_END``; ``MATCH`` last.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from colcep.lang.sql.limits import MAX_EXPRESSION_DEPTH, check_pattern, check_query, check_tree, deep_stack
from colcep.lang.sql.syntax import SqlError

__all__ = ["Query", "parse", "compile_pattern", "Ins", "StdError"]


class StdError(SqlError):
    """A query the standard refuses, or a run that fails (e.g. AFTER MATCH SKIP TO a missing row)."""


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


def _strip_block_comments(query: str) -> str:
    """``/* ... */`` comments as spaces, in one pass (a lazy regex rescans the rest of the query
    from every unclosed ``/*``)."""
    out, i = [], 0
    while (j := query.find("/*", i)) >= 0 and (k := query.find("*/", j + 2)) >= 0:
        out += [query[i:j], " "]
        i = k + 2
    return "".join(out) + query[i:]


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
    order: list[tuple[str, bool, bool]]  # (column, descending, nulls first)
    measures: list[tuple[str, Any]]     # (name, expression)
    rows: str                           # one | all | all_omit | all_unmatched
    skip: tuple                         # ("past",) | ("next",) | ("first"|"last", var)
    pattern: Any
    subsets: dict[str, set[str]]
    define: dict[str, Any]
    variables: list[str] = field(default_factory=list)
    table: str = ""                     # the FROM table


def parse(query: str) -> Query:
    """The query's clauses, within the limits of :mod:`colcep.lang.sql.limits`; a StdError names
    what could not be read."""
    check_query(query)
    try:
        with deep_stack(query):
            return _parse(query)
    except SqlError:
        raise
    except (KeyError, AttributeError, IndexError, ValueError, sqlglot.errors.SqlglotError) as e:
        raise StdError(f"MATCH_RECOGNIZE: could not parse the query ({type(e).__name__}: {e})") from None


def _parse(query: str) -> Query:
    query = re.sub(r"--[^\n]*", " ", _strip_block_comments(query))
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
    sel = re.match(r"\s*SELECT\s+(.*?\S)\s+FROM\s", query, re.I | re.S)   # (\S: linear over runs of spaces)
    select = _select_list(sel.group(1)) if sel else []
    frm = re.search(r"\bFROM\s+(\"[^\"]+\"|\w+)\s+MATCH_RECOGNIZE", query, re.I)
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
    q = Query(select, [], [], [], "one", ("past",), None, {}, {}, table=frm.group(1).strip('"') if frm else "")
    if "PATTERN" not in parts:
        raise StdError("MATCH_RECOGNIZE needs a PATTERN")
    if "PARTITION" in parts:
        q.partition = [c.strip() for c in _split_top(parts["PARTITION"][1])]
    if "ORDER" in parts:
        for c in _split_top(parts["ORDER"][1]):
            w = c.split()
            u = [x.upper() for x in w[1:]]
            desc = bool(u) and u[0] == "DESC"
            nulls = " ".join(u[1:] if u and u[0] in ("ASC", "DESC") else u)
            if nulls not in ("", "NULLS FIRST", "NULLS LAST"):
                raise StdError(f"ORDER BY: expected ASC, DESC, NULLS FIRST or NULLS LAST after {w[0]}, got {nulls!r}")
            q.order.append((w[0], desc, nulls == "NULLS FIRST"))   # NULLS LAST by default, as in Trino
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
    if re.search(r"\)\s*WITHIN\b", text, re.I):
        raise StdError("PATTERN: WITHIN is Flink's extension, not the standard's; run the query with "
                       "semantics='cep' or 'flink'")
    q.pattern = PatternParser(text[1:-1]).parse()
    check_tree("PATTERN", q.pattern, _pattern_parts, MAX_EXPRESSION_DEPTH, "the pattern")
    q.variables = sorted(_pattern_vars(q.pattern))
    check_pattern(len(q.variables), pattern_size(q.pattern))
    if "DEFINE" in parts:
        for d in _split_top(parts["DEFINE"][1]):
            mm = re.match(r"\s*(\"[^\"]+\"|\w+)\s+AS\s+(.*)$", d, re.I | re.S)
            if mm is None:
                raise StdError(f"DEFINE: expected <variable> AS <condition>, got {d[:80]!r}")
            q.define[_ident(mm.group(1))] = _expr(mm.group(2), f"DEFINE {_ident(mm.group(1))}")
    if "MEASURES" in parts:
        for d in _split_top(parts["MEASURES"][1]):
            mm = re.match(r"(.*\S)\s+AS\s+(\"[^\"]+\"|\w+)\s*$", d, re.I | re.S)
            if mm is None:
                raise StdError(f"MEASURES: expected <expression> AS <name>, got {d[:80]!r}")
            name = _ident(mm.group(2)).lower()
            q.measures.append((name, _expr(mm.group(1), f"MEASURES {name}")))
    _check_variables(q)
    if q.rows == "all_unmatched" and _has_exclusion(q.pattern):
        raise StdError("Pattern exclusion syntax is not allowed when ALL ROWS PER MATCH WITH UNMATCHED ROWS is specified")
    return q


def _check_variables(q: Query) -> None:
    """Every label DEFINE, SUBSET, MEASURES and AFTER MATCH SKIP name is a pattern variable (or,
    outside SUBSET, a union variable), as the standard requires."""
    known = set(q.variables)
    for name, members in q.subsets.items():
        if name in known:
            raise StdError(f"SUBSET: {name!r} is already a pattern variable")
        for m in sorted(members - known):
            raise StdError(f"SUBSET: subset element {m!r} is not a primary pattern variable")
    for var in q.define:
        if var not in known:
            raise StdError(f"DEFINE: defined variable {var!r} is not a primary pattern variable")
    known |= set(q.subsets)
    for clause, nodes in (("DEFINE", q.define.values()), ("MEASURES", [e for _, e in q.measures])):
        for node in nodes:
            _check_nesting(clause, node)
    if q.skip[0] in ("first", "last") and q.skip[1] not in known:
        raise StdError(f"AFTER MATCH SKIP: {q.skip[1]!r} is not a pattern variable or SUBSET")
    for clause, nodes in (("DEFINE", q.define.values()), ("MEASURES", [e for _, e in q.measures])):
        for node in nodes:
            refs = {_table_var(c) for c in node.find_all(exp.Column) if c.table}
            refs |= {_ident(f.expressions[0].sql()) for f in node.find_all(exp.Anonymous)
                     if f.name.upper() in ("CLASSIFIER", "__ALLROWS") and f.expressions}
            for r in sorted(refs - known):
                raise StdError(f"{clause}: {r!r} is not a pattern variable or SUBSET ({', '.join(sorted(known))})")


NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "MAX_BY", "MIN_BY", "ARRAY_AGG", "ANY_VALUE", "ARBITRARY"}


def _check_nesting(clause: str, node, inside: str | None = None) -> None:
    """The standard's nesting rules: an aggregate's arguments hold no navigation or aggregate, a
    navigation's argument no aggregate, and only PREV / NEXT may hold FIRST / LAST."""
    if isinstance(node, exp.Func):
        name = _call(node)[0]
        if name in AGGREGATES:
            if inside is not None:
                raise StdError(f"{clause}: {name} cannot be nested in {inside} ({node.sql()!r})")
            if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
                raise StdError(f"{clause}: DISTINCT aggregates are not supported ({node.sql()!r})")
            for a in _call(node)[1]:
                _check_nesting(clause, a, name)
            return
        if name in NAVIGATION:
            if inside in AGGREGATES or (inside in NAVIGATION and not (
                    inside in ("PREV", "NEXT") and name in ("FIRST", "LAST"))):
                raise StdError(f"{clause}: {name} cannot be nested in {inside} ({node.sql()!r})")
            args = _call(node)[1]
            if name in ("PREV", "NEXT") and args and not (isinstance(args[0], exp.Func) and
                                                          _call(args[0])[0] in ("FIRST", "LAST")):
                for f in args[0].find_all(exp.Func):
                    if _call(f)[0] in ("FIRST", "LAST"):
                        raise StdError(f"{clause}: immediate nesting is required for pattern navigation functions: "
                                       f"{_call(f)[0]} must be {name}'s argument itself ({node.sql()!r})")
            for a in args:
                _check_nesting(clause, a, name)
            return
    for child in node.iter_expressions():
        _check_nesting(clause, child, inside)


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
        item = re.sub(r"^CAST\s*\((.*\S)\s+AS\s+[\w() ,]+\)(?=\s+AS\s|\s*$)", r"\1", item.strip(), flags=re.I)
        mm = re.match(r"(?:\w+\.)?(\w+)(?:\s+AS\s+(\w+))?\s*$", item.strip(), re.I)
        if not mm:
            raise StdError(f"select item not understood by the reference: {item!r}")
        out.append((mm.group(1).lower(), (mm.group(2) or mm.group(1)).lower()))
    return out


def _expr(text: str, clause: str):
    text = re.sub(r"\b(RUNNING|FINAL)\s+(\w+)\s*\(", lambda m: f"__{m.group(1).lower()}_{m.group(2).lower()}(", text,
                  flags=re.I)
    text = re.sub(r"\b(\"[^\"]+\"|\w+)\.\*", lambda m: f"__allrows({m.group(1)})", text)
    node = sqlglot.parse_one("SELECT " + text, read="trino").expressions[0]
    check_tree(clause, node)
    return node


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
                        if hi is not None and hi < lo:
                            raise StdError(f"PATTERN: the quantifier {t} has its upper bound below its lower")
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


def _pattern_parts(node) -> tuple:
    if isinstance(node, (Seq, Alt, Perm)):
        return node.parts
    return (node.node,) if isinstance(node, (Rep, Excl)) else ()


def pattern_size(node) -> int:
    """The pattern's variable positions written out (as :mod:`colcep.lang.sql.limits` counts
    them): a quantified operand repeated ``m`` times for ``{n,m}`` and ``n + 1`` times for
    ``{n,}`` (an empty one counting one), ``PERMUTE`` every order, an anchor one."""
    if isinstance(node, (Var, Anchor)):
        return 1
    if isinstance(node, Excl):
        return pattern_size(node.node)
    if isinstance(node, Rep):
        return max(pattern_size(node.node), 1) * max(node.hi if node.hi is not None else node.lo + 1, 1)
    parts = sum(pattern_size(p) for p in node.parts)
    return parts * math.factorial(min(len(node.parts), 20)) if isinstance(node, Perm) else parts  # 20!: past any limit


def _has_exclusion(node) -> bool:
    if isinstance(node, Excl):
        return True
    if isinstance(node, Rep):
        return _has_exclusion(node.node)
    if isinstance(node, (Seq, Alt, Perm)):
        return any(_has_exclusion(p) for p in node.parts)
    return False


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


def int_literal(node, default: Any, what: str, non_negative: bool = False) -> Any:
    """An integer literal argument (``-3`` included unless ``non_negative``), ``default`` when
    absent; anything else is a ``StdError`` naming ``what``."""
    if node is None:
        return default
    neg = isinstance(node, exp.Neg) and not non_negative
    lit = node.this if neg else node
    if not isinstance(lit, exp.Literal) or lit.is_string or not re.fullmatch(r"\d+", lit.this):
        kind = "a non-negative integer literal" if non_negative else "an integer literal"
        raise StdError(f"{what} takes {kind} here, not {node.sql()!r}")
    return -int(lit.this) if neg else int(lit.this)
