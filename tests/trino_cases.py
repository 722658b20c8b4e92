#!/usr/bin/env python3
"""Extract Trino's MATCH_RECOGNIZE test cases as data.

Reads a copy of Trino's ``TestRowPatternMatching.java`` (trinodb/trino,
core/trino-main/src/test/java/io/trino/sql/query/) and writes every
``assertThat(assertions.query(...))`` / ``assertThatThrownBy(() -> assertions.query(...))``
of it as one case::

    python tests/trino_cases.py TestRowPatternMatching.java -o tests/data/sql_standard_trino.json

Further Trino test files written the same way can follow the first one; the committed corpus
also holds ``TestAggregationsInRowPatternMatching.java`` (aggregations in MEASURES and DEFINE)::

    python tests/trino_cases.py TestRowPatternMatching.java \
        TestAggregationsInRowPatternMatching.java -o tests/data/sql_standard_trino.json

Standard library only. The Java text is lexed (string literals, text blocks, comments), the
query of each assertion is evaluated the way Java would build it (``+`` concatenation, local
``String`` variables, ``format(query, ...)``/``String.format``/``.formatted``), and then:

* the one ``(VALUES ...) t(cols)`` subquery in FROM becomes the input table and is replaced by
  the table name ``t`` (``(SELECT * FROM (VALUES ...) WHERE false) t(cols)`` is an empty input);
* ``.matches("VALUES ...")`` becomes ``{"columns", "rows", "ordered"}`` -- Trino's
  QueryAssertions compare as a multiset unless ``.ordered()`` was called; output column
  names come from the SELECT list (``SELECT *`` is expanded with the MATCH_RECOGNIZE output
  layout: PARTITION BY columns, then for ALL ROWS PER MATCH the ORDER BY columns, then the
  measures, then for ALL ROWS PER MATCH the remaining input columns);
* ``.returnsEmptyResult()`` becomes ``{"empty": true}``; ``.hasMessage(...)`` (after
  ``assertThatThrownBy`` or ``.failure()``) becomes ``{"error": message}``;
* literals: ``CAST(x AS type)`` -> x, ``VARCHAR 'A'`` / ``BIGINT '1'`` -> the value,
  ``4e0`` -> 4.0, ``ARRAY[...]`` -> list, SQL NULL -> null.

A case that cannot run against one input table (several tables, a WITH clause, subqueries
inside MEASURES/DEFINE) is kept with ``"skip": reason``. Each case also lists the
MATCH_RECOGNIZE ``features`` its query uses, so a consumer can select cases.
"""

import argparse
import hashlib
import json
import os
import re
import sys

SOURCE_DIR = "trinodb/trino:core/trino-main/src/test/java/io/trino/sql/query/"


class Unsupported(Exception):
    """A construct this extractor does not turn into data."""


# --------------------------------------------------------------------------- Java lexing

_JAVA_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "s": " ",
                 '"': '"', "'": "'", "\\": "\\"}


def _java_unescape(body):
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _JAVA_ESCAPES:
            out.append(_JAVA_ESCAPES[n])
            i += 2
        elif n == "u":
            j = i + 1
            while body[j] == "u":
                j += 1
            out.append(chr(int(body[j:j + 4], 16)))
            i = j + 4
        elif n in "01234567":
            m = re.match(r"[0-3]?[0-7]{1,2}", body[i + 1:])
            out.append(chr(int(m.group(0), 8)))
            i += 1 + len(m.group(0))
        elif n == "\n":  # text block line continuation
            i += 2
        else:
            raise Unsupported("Java escape \\" + n)
    return "".join(out)


def _text_block(raw):
    """Content of a Java text block (between the opening and closing triple quotes)."""
    first_nl = raw.index("\n")
    lines = raw[first_nl + 1:].split("\n")
    # the closing delimiter's line counts for the indentation even when blank
    significant = [ln for ln in lines[:-1] if ln.strip()] + [lines[-1]]
    indent = min(len(ln) - len(ln.lstrip(" \t")) for ln in significant)
    out = [ln[indent:].rstrip(" \t") for ln in lines]
    return _java_unescape("\n".join(out))


def java_tokens(src):
    """(kind, value, pos) with kind in str/id/num/op/comment."""
    toks = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            toks.append(("comment", src[i + 2:j].strip(), i))
            i = j
        elif src.startswith("/*", i):
            j = src.index("*/", i) + 2
            toks.append(("comment", src[i:j], i))
            i = j
        elif src.startswith('"""', i):
            j = src.index('"""', i + 3)
            while src[j - 1] == "\\" and src[j - 2] != "\\":  # escaped quote inside
                j = src.index('"""', j + 1)
            toks.append(("str", _text_block(src[i + 3:j]), i))
            i = j + 3
        elif c in "\"'":                     # a string or char literal
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            toks.append(("str" if c == '"' else "char", _java_unescape(src[i + 1:j]), i))
            i = j + 1
        elif c.isalpha() or c in "_$@":
            m = re.compile(r"@?[A-Za-z_$][A-Za-z0-9_$]*").match(src, i)
            toks.append(("id", m.group(0), i))
            i = m.end()
        elif c.isdigit():
            m = re.compile(r"[0-9][0-9_.xXa-fA-FlLdDeE]*").match(src, i)
            toks.append(("num", m.group(0), i))
            i = m.end()
        elif src.startswith("->", i) or src.startswith("::", i):
            toks.append(("op", src[i:i + 2], i))
            i += 2
        else:
            toks.append(("op", c, i))
            i += 1
    return toks


def java_methods(toks):
    """[(name, body tokens incl. comments)] for every method with a body."""
    out = []
    i = 0
    while i < len(toks):
        k, v, _ = toks[i]
        if (k == "id" and v == "void" and i + 3 < len(toks) and toks[i + 1][0] == "id"
                and toks[i + 2][1] == "("):
            name = toks[i + 1][1]
            j = i + 2
            depth = 0
            while True:  # parameter list
                if toks[j][1] == "(":
                    depth += 1
                elif toks[j][1] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            j += 1
            while toks[j][1] != "{":  # throws clause
                j += 1
            start = j + 1
            depth = 0
            while True:
                if toks[j][0] == "op" and toks[j][1] == "{":
                    depth += 1
                elif toks[j][0] == "op" and toks[j][1] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append((name, toks[start:j]))
            i = j + 1
        else:
            i += 1
    return out


def java_statements(body):
    """Split a method body into (leading comments, tokens without comments) per statement."""
    stmts = []
    comments, cur = [], []
    depth = 0
    for tok in body:
        if tok[0] == "comment":
            if not cur:
                comments.append(tok[1])
            continue
        cur.append(tok)
        if tok[0] == "op" and tok[1] in "({[":
            depth += 1
        elif tok[0] == "op" and tok[1] in ")}]":
            depth -= 1
        elif tok[0] == "op" and tok[1] == ";" and depth == 0:
            stmts.append((comments, cur[:-1]))
            comments, cur = [], []
    return stmts


def java_format(fmt, args):
    out = []
    args = list(args)
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            out.append(fmt[i])
            i += 1
            continue
        spec = fmt[i + 1]
        if spec == "%":
            out.append("%")
        elif spec == "n":
            out.append("\n")
        elif spec in "sd":
            out.append(str(args.pop(0)))
        else:
            raise Unsupported("format specifier %" + spec)
        i += 2
    return "".join(out)


class JavaExpr:
    """Evaluates string-valued Java expressions: literals, variables, +, format()."""

    def __init__(self, toks, env):
        self.t = toks
        self.i = 0
        self.env = env

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else (None, None, None)

    def take(self, value=None):
        tok = self.t[self.i]
        if value is not None and tok[1] != value:
            raise Unsupported("expected %r, got %r" % (value, tok[1]))
        self.i += 1
        return tok

    def args(self):
        self.take("(")
        vals = []
        if self.peek()[1] != ")":
            vals.append(self.expr())
            while self.peek()[1] == ",":
                self.take(",")
                vals.append(self.expr())
        self.take(")")
        return vals

    def expr(self):
        val = self.term()
        while self.peek()[0] == "op" and self.peek()[1] == "+":
            self.take("+")
            val = str(val) + str(self.term())
        return val

    def term(self):
        kind, v, _ = self.peek()
        if kind == "str":
            self.take()
            val = v
        elif kind == "num":
            self.take()
            val = v
        elif kind == "op" and v == "(":
            self.take("(")
            val = self.expr()
            self.take(")")
        elif kind == "id":
            self.take()
            if v == "String" and self.peek()[1] == ".":
                self.take(".")
                v = self.take()[1]
            if self.peek()[1] == "(":
                args = self.args()
                if v == "format":
                    val = java_format(args[0], args[1:])
                else:
                    raise Unsupported("Java call %s()" % v)
            elif v in self.env:
                val = self.env[v]
            else:
                raise Unsupported("unknown Java variable " + v)
        else:
            raise Unsupported("Java token %r" % (v,))
        while self.peek()[1] == "." and self.peek(1)[1] == "formatted":
            self.take(".")
            self.take()
            val = java_format(val, self.args())
        return val


def _split_call(toks, start):
    """toks[start] is '('; return (index after matching ')', top-level comma-split args)."""
    depth = 0
    args, cur = [], []
    j = start
    while True:
        v = toks[j][1] if toks[j][0] == "op" else None
        if v in ("(", "{", "["):
            depth += 1
            if depth > 1:
                cur.append(toks[j])
        elif v in (")", "}", "]"):
            depth -= 1
            if depth == 0:
                break
            cur.append(toks[j])
        elif v == "," and depth == 1:
            args.append(cur)
            cur = []
        else:
            cur.append(toks[j])
        j += 1
    if cur or args:
        args.append(cur)
    return j + 1, args


_ASSERT_HEADS = ("assertThat", "assertThatThrownBy", "assertTrinoExceptionThrownBy")


def parse_assertion(toks, env):
    """An assertion statement -> dict(query=..., expect=...); None if not one."""
    head = toks[0][1] if toks else None
    if head not in _ASSERT_HEADS:
        return None
    end, (inner,) = _split_call(toks, 1)
    # locate assertions.query(...) inside the first argument (possibly within a lambda)
    q = None
    for j in range(len(inner) - 2):
        if inner[j][1] == "assertions" and inner[j + 1][1] == "." and inner[j + 2][1] == "query":
            _, qargs = _split_call(inner, j + 3)
            q = JavaExpr(qargs[-1], env).expr()
            break
    if q is None:
        return None
    expect = {"kind": None if head == "assertThat" else "error"}
    ordered = False
    extra = []
    j = end
    while j < len(toks):
        if toks[j][1] != ".":
            raise Unsupported("assertion chain at %r" % (toks[j][1],))
        name = toks[j + 1][1]
        j, args = _split_call(toks, j + 2)
        if name == "matches":
            expect.update(kind="rows", values=JavaExpr(args[0], env).expr())
        elif name == "ordered":
            ordered = True
        elif name == "returnsEmptyResult":
            expect.update(kind="empty")
        elif name == "failure":
            expect["kind"] = "error"
        elif name in ("hasMessage", "hasMessageContaining", "hasMessageMatching",
                      "hasMessageStartingWith", "hasMessageEndingWith"):
            expect.update(kind="error", message=JavaExpr(args[0], env).expr(),
                          match={"hasMessage": "exact", "hasMessageContaining": "contains",
                                 "hasMessageMatching": "regex",
                                 "hasMessageStartingWith": "prefix",
                                 "hasMessageEndingWith": "suffix"}[name])
        elif name in ("hasErrorCode", "isInstanceOf", "skippingTypesCheck"):
            extra.append(name + "(" + ", ".join(" ".join(t[1] for t in a) for a in args) + ")")
        else:
            raise Unsupported("assertion ." + name + "()")
    expect["ordered"] = ordered
    expect["extra"] = extra
    return {"query": q, "expect": expect}


def extract_java(src):
    """[(method, ordinal, line, comments, query, expect)] in file order."""
    toks = java_tokens(src)
    out = []
    for method, body in java_methods(toks):
        env = {}
        ordinal = 0
        for comments, st in java_statements(body):
            if not st:
                continue
            # String x = <expr>;  or  x = <expr>;  (a variable that cannot be evaluated is
            # dropped: assertions using it become skipped cases)
            var = None
            if len(st) > 3 and st[0][1] == "String" and st[1][0] == "id" and st[2][1] == "=":
                var, expr = st[1][1], st[3:]
            elif len(st) > 2 and st[0][0] == "id" and st[1][1] == "=" and st[0][1] in env:
                var, expr = st[0][1], st[2:]
            if var is not None:
                try:
                    env[var] = JavaExpr(expr, env).expr()
                except (Unsupported, IndexError):
                    env.pop(var, None)
                continue
            try:
                a = parse_assertion(st, env)
            except (Unsupported, IndexError) as e:
                a = {"query": None, "expect": "extractor: Java assertion not understood: %s" % e}
            if a is None:
                continue
            ordinal += 1
            line = src.count("\n", 0, st[0][2]) + 1
            out.append((method, ordinal, line, comments, a["query"], a["expect"]))
    return out


# --------------------------------------------------------------------------- SQL lexing

_SQL_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>/\*.*?\*/|--[^\n]*)
  | (?P<str>'(?:[^']|'')*')
  | (?P<qid>"(?:[^"]|"")*")
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|\|\||\{-|-\}|=>|[-+*/%(),.\[\]{}<>=^$|?;:])
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind, text, start, end):
        self.kind, self.text, self.start, self.end = kind, text, start, end

    @property
    def up(self):
        return self.text.upper() if self.kind == "id" else self.text

    def __repr__(self):
        return self.text


def sql_tokens(sql, keep_ws=False):
    out = []
    pos = 0
    while pos < len(sql):
        m = _SQL_TOKEN.match(sql, pos)
        if not m:
            raise Unsupported("SQL lexing at %r" % sql[pos:pos + 20])
        kind = m.lastgroup
        if keep_ws or kind not in ("ws", "comment"):
            out.append(Tok(kind, m.group(0), m.start(), m.end()))
        pos = m.end()
    return out


def normalize_sql(sql):
    """Collapse whitespace runs outside literals/comments to one space; strip."""
    parts = []
    for t in sql_tokens(sql, keep_ws=True):
        parts.append(" " if t.kind == "ws" else t.text)
    return "".join(parts).strip()


def match_paren(toks, i):
    """toks[i] opens a bracket; index of its partner."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text in ("(", "["):
            depth += 1
        elif toks[j].text in (")", "]"):
            depth -= 1
            if depth == 0:
                return j
    raise Unsupported("unbalanced parentheses")


def split_top(toks, sep=","):
    parts, cur, depth = [], [], 0
    for t in toks:
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            depth -= 1
        if depth == 0 and t.text == sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


def ident(t):
    if t.kind == "qid":
        return t.text[1:-1].replace('""', '"')
    return t.text


# --------------------------------------------------------------------------- SQL literals

_TYPED_STRING = {"VARCHAR", "CHAR", "BIGINT", "INTEGER", "INT", "SMALLINT", "TINYINT",
                 "DOUBLE", "REAL", "DECIMAL", "BOOLEAN", "DATE", "TIME", "TIMESTAMP", "JSON"}


class Literal:
    def __init__(self, toks, notes):
        self.t = toks
        self.i = 0
        self.notes = notes

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, text=None):
        t = self.t[self.i]
        if text is not None and t.up != text:
            raise Unsupported("expected %s, got %s" % (text, t.text))
        self.i += 1
        return t

    def done(self):
        return self.i == len(self.t)

    def value(self):
        t = self.peek()
        if t is None:
            raise Unsupported("empty value")
        if t.text == "-" and self.i + 1 < len(self.t) and self.t[self.i + 1].kind == "num":
            self.take()
            return -self.number(self.take().text)
        if t.kind == "num":
            return self.number(self.take().text)
        if t.kind == "str":
            return self.take().text[1:-1].replace("''", "'")
        if t.kind == "id":
            u = t.up
            if u == "NULL":
                self.take()
                return None
            if u in ("TRUE", "FALSE"):
                self.take()
                return u == "TRUE"
            if u == "CAST" or u == "TRY_CAST":
                self.take()
                self.take("(")
                close = match_paren(self.t, self.i - 1)
                inner = Literal(self.t[self.i:close], self.notes)
                v = inner.value()
                inner.take("AS")
                typ = " ".join(x.text for x in inner.t[inner.i:]).lower()
                self.i = close + 1
                return self.coerce(v, typ)
            if u == "ARRAY" and self.i + 1 < len(self.t) and self.t[self.i + 1].text == "[":
                self.take()
                close = match_paren(self.t, self.i)
                items = split_top(self.t[self.i + 1:close])
                self.i = close + 1
                return [Literal(it, self.notes).whole() for it in items]
            if (u in _TYPED_STRING and self.i + 1 < len(self.t)
                    and self.t[self.i + 1].kind == "str"):
                self.take()
                s = self.take().text[1:-1].replace("''", "'")
                return self.coerce(s, u.lower())
        if t.text == "(":
            close = match_paren(self.t, self.i)
            v = Literal(self.t[self.i + 1:close], self.notes).whole()
            self.i = close + 1
            return v
        raise Unsupported("not a literal: " + " ".join(x.text for x in self.t[self.i:]))

    def whole(self):
        v = self.value()
        if not self.done():
            raise Unsupported("not a literal: " + " ".join(x.text for x in self.t))
        return v

    @staticmethod
    def number(text):
        if re.fullmatch(r"\d+", text):
            return int(text)
        return float(text)

    def coerce(self, v, typ):
        base = typ.split("(")[0].strip()
        if v is None:
            return None
        if isinstance(v, str) and base in ("bigint", "integer", "int", "smallint", "tinyint"):
            return int(v)
        if isinstance(v, str) and base in ("double", "real", "decimal"):
            return float(v)
        if isinstance(v, str) and base == "boolean":
            return v.lower() == "true"
        if base in ("date", "time", "timestamp"):
            self.notes.add("%s values are ISO strings" % base.upper())
        return v


def values_rows(toks, notes):
    """Tokens after VALUES -> list of rows (lists)."""
    rows = []
    for item in split_top(toks):
        if item[0].up == "ROW" and len(item) > 1 and item[1].text == "(":
            item = item[1:]
        if item[0].text == "(" and match_paren(item, 0) == len(item) - 1:
            fields = split_top(item[1:-1])
            rows.append([Literal(f, notes).whole() for f in fields])
        else:
            rows.append([Literal(item, notes).whole()])
    return rows


# --------------------------------------------------------------------------- query analysis

_MR_CLAUSES = {"PARTITION", "ORDER", "MEASURES", "ONE", "ALL", "AFTER", "PATTERN", "SUBSET",
               "DEFINE", "INITIAL", "SEEK"}
_NAVIGATION = {"PREV", "NEXT", "FIRST", "LAST"}
_AGGREGATES = {"SUM", "AVG", "COUNT", "MIN", "MAX", "ARRAY_AGG", "COUNT_IF", "BOOL_AND",
               "BOOL_OR", "EVERY", "ARBITRARY", "ANY_VALUE", "MAX_BY", "MIN_BY", "LISTAGG",
               "STDDEV", "VARIANCE", "APPROX_DISTINCT", "GEOMETRIC_MEAN", "SET_AGG", "MAP_AGG"}
_SPECIAL_CALLS = {"PREV", "NEXT", "FIRST", "LAST", "CLASSIFIER", "MATCH_NUMBER", "CAST",
                  "RUNNING", "FINAL", "EXISTS"}


def find_top_from(toks):
    depth = 0
    for i, t in enumerate(toks):
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            depth -= 1
        elif depth == 0 and t.up == "FROM":
            return i
    raise Unsupported("no FROM")


def mr_clause(toks):
    """Index range (open, close) of the MATCH_RECOGNIZE parentheses."""
    for i, t in enumerate(toks):
        if t.up == "MATCH_RECOGNIZE":
            return i + 1, match_paren(toks, i + 1)
    raise Unsupported("no MATCH_RECOGNIZE")


def mr_sections(toks):
    """Top-level clauses of a MATCH_RECOGNIZE body -> {clause: tokens}."""
    sections = {}
    cur = None
    depth = 0
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "id" and t.up in _MR_CLAUSES:
            nxt = toks[i + 1].up if i + 1 < len(toks) else ""
            key = t.up
            if key in ("PARTITION", "ORDER") and nxt == "BY":
                i += 2
            elif key in ("ONE", "ALL") and nxt in ("ROW", "ROWS"):
                key = "ROWS PER MATCH"
            elif key in ("ONE", "ALL", "PARTITION", "ORDER"):
                key = None
            else:
                i += 1
            if key:
                cur = key
                sections.setdefault(cur, [])
                if key == "ROWS PER MATCH":
                    sections[cur].append(t)
                    i += 1
                continue
        if cur:
            sections[cur].append(t)
        i += 1
    return sections


def measure_names(sec):
    names = []
    for item in split_top(sec.get("MEASURES", [])):
        if len(item) >= 2 and item[-2].up == "AS":
            names.append(ident(item[-1]))
        else:
            raise Unsupported("measure without alias")
    return names


def order_columns(sec):
    cols = []
    for item in split_top(sec.get("ORDER", [])):
        cols.append(ident(item[0]) if len(item) == 1 or item[1].up in (
            "ASC", "DESC", "NULLS") else " ".join(t.text for t in item))
    return cols


def output_columns(toks, input_columns):
    """Names of the query's output columns (SELECT list; * expanded per MATCH_RECOGNIZE)."""
    depth = 0
    sel = None
    for i, t in enumerate(toks):  # the top-level SELECT (after any WITH clause)
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            depth -= 1
        elif depth == 0 and t.up == "SELECT":
            sel = i
            break
    if sel is None:
        raise Unsupported("no SELECT")
    frm = sel + find_top_from(toks[sel:])
    first = sel + 2 if toks[sel + 1].up == "DISTINCT" else sel + 1
    cols = []
    for n, item in enumerate(split_top(toks[first:frm])):
        if len(item) == 1 and item[0].text == "*":
            o, c = mr_clause(toks)
            sec = mr_sections(toks[o + 1:c])
            part = [ident(x[0]) for x in split_top(sec.get("PARTITION", []))]
            order = order_columns(sec)
            all_rows = any(t.up == "ALL" for t in sec.get("ROWS PER MATCH", []))
            cols += part
            if all_rows:
                cols += order
            cols += measure_names(sec)
            if all_rows:
                if input_columns is None:
                    raise Unsupported("SELECT * without known input columns")
                cols += [c for c in input_columns if c not in part and c not in order]
        elif len(item) >= 2 and item[-2].up == "AS":
            cols.append(ident(item[-1]))
        elif len(item) == 1 and item[0].kind in ("id", "qid"):
            cols.append(ident(item[0]))
        elif len(item) == 3 and item[1].text == "." and item[2].kind in ("id", "qid"):
            cols.append(ident(item[2]))
        elif (len(item) >= 2 and item[-1].kind in ("id", "qid") and item[-2].up != "OVER"
              and (item[-2].kind not in ("op",) or item[-2].text == ")")):
            cols.append(ident(item[-1]))  # implicit alias
        else:
            cols.append("_col%d" % n)
    return cols


class _Pattern:
    """Parses a PATTERN to tell whether it can match the empty sequence."""

    def __init__(self, toks):
        self.t = toks
        self.i = 0

    def peek(self):
        return self.t[self.i].text if self.i < len(self.t) else None

    def nullable(self):
        v = self.alt()
        if self.i != len(self.t):
            raise Unsupported("pattern syntax at %s" % self.peek())
        return v

    def alt(self):
        v = self.seq()
        while self.peek() == "|":
            self.i += 1
            v = self.seq() or v
        return v

    def seq(self):
        v = True
        while self.peek() not in (None, "|", ")", "-}", ","):
            v = self.quantified() and v
        return v

    def quantified(self):
        v = self.primary()
        while self.peek() in ("*", "+", "?", "{"):
            q = self.t[self.i].text
            self.i += 1
            low = 1
            if q in ("*", "?"):
                low = 0
            elif q == "{":
                body = []
                while self.peek() != "}":
                    body.append(self.t[self.i].text)
                    self.i += 1
                self.i += 1
                low = int(body[0]) if body and body[0] != "," else 0
            if self.peek() == "?":  # reluctant
                self.i += 1
            v = v or low == 0
        return v

    def primary(self):
        tok = self.t[self.i]
        self.i += 1
        if tok.text in ("^", "$"):
            return True
        if tok.text == "(":
            v = self.alt()
            self.expect(")")
            return v
        if tok.text == "{-":
            v = self.alt()
            self.expect("-}")
            return v
        if tok.up == "PERMUTE":
            self.expect("(")
            v = self.alt()
            while self.peek() == ",":
                self.i += 1
                v = self.alt() and v
            self.expect(")")
            return v
        if tok.kind in ("id", "qid"):
            return False
        raise Unsupported("pattern syntax at %s" % tok.text)

    def expect(self, text):
        if self.peek() != text:
            raise Unsupported("pattern syntax: expected %s" % text)
        self.i += 1


def features(toks):
    """MATCH_RECOGNIZE features used by a (rewritten) query."""
    f = set()
    o, c = mr_clause(toks)
    body = toks[o + 1:c]
    sec = mr_sections(body)
    if toks[0].up == "SELECT" and toks[1].text == "*":
        f.add("SELECT *")
    f.add("PARTITION BY" if "PARTITION" in sec else "no PARTITION BY")
    f.add("ORDER BY" if "ORDER" in sec else "no ORDER BY")
    if "MEASURES" not in sec:
        f.add("no MEASURES")
    rpm = " ".join(t.up for t in sec.get("ROWS PER MATCH", []))
    if not rpm:
        f.add("ONE ROW PER MATCH (default)")
    elif rpm.startswith("ONE"):
        f.add("ONE ROW PER MATCH")
    else:
        f.add("ALL ROWS PER MATCH")
        for opt in ("SHOW EMPTY MATCHES", "OMIT EMPTY MATCHES", "WITH UNMATCHED ROWS"):
            if opt in rpm:
                f.add(opt)
    skip = " ".join(t.up if t.kind == "id" else t.text for t in sec.get("AFTER", []))
    if not skip:
        f.add("AFTER MATCH SKIP (default PAST LAST ROW)")
    else:
        words = skip.split()
        if "PAST" in words:
            f.add("AFTER MATCH SKIP PAST LAST ROW")
        elif "NEXT" in words:
            f.add("AFTER MATCH SKIP TO NEXT ROW")
        elif "FIRST" in words:
            f.add("AFTER MATCH SKIP TO FIRST var")
        elif "LAST" in words:
            f.add("AFTER MATCH SKIP TO LAST var")
        else:
            f.add("AFTER MATCH SKIP TO var (LAST implied)")
    if "SUBSET" in sec:
        f.add("SUBSET (union variables)")
    if "DEFINE" not in sec:
        f.add("no DEFINE")

    pat = sec.get("PATTERN", [])
    if pat and pat[0].text == "(" and match_paren(pat, 0) == len(pat) - 1:
        try:
            if _Pattern(pat[1:-1]).nullable():
                f.add("pattern can match empty (empty matches)")
        except (Unsupported, IndexError, ValueError):
            pass
    pvars = set()
    for i, t in enumerate(pat):
        if t.kind in ("id", "qid") and t.up != "PERMUTE":
            pvars.add(ident(t) if t.kind == "qid" else t.up)
            if t.kind == "qid":
                f.add("delimited (case-sensitive) pattern variable")
        if t.up == "PERMUTE":
            f.add("PERMUTE")
        elif t.text == "^":
            f.add("anchor ^ (partition start)")
        elif t.text == "$":
            f.add("anchor $ (partition end)")
        elif t.text == "{-":
            f.add("exclusion {- -}")
        elif t.text == "|":
            f.add("alternation |")
        elif t.text == "(" and i + 1 < len(pat) and pat[i + 1].text == ")":
            f.add("empty pattern ()")
        elif t.text in ("*", "+", "?") or (t.text == "{" and i + 1 < len(pat)
                                           and pat[i + 1].text != "-"):
            if t.text == "{":
                close = next(j for j in range(i, len(pat)) if pat[j].text == "}")
                q = "".join(x.text for x in pat[i:close + 1])
                f.add("quantifier {n,m}" if "," in q else "quantifier {n}")
                nxt = pat[close + 1] if close + 1 < len(pat) else None
            else:
                if t.text == "?" and i > 0 and pat[i - 1].text in ("*", "+", "?", "}"):
                    continue  # reluctance marker, counted below
                f.add("quantifier " + t.text)
                nxt = pat[i + 1] if i + 1 < len(pat) else None
            if nxt is not None and nxt.text == "?":
                f.add("reluctant quantifier")
            prev = pat[i - 1] if i > 0 else None
            if prev is not None and prev.text in ("^", "$"):
                f.add("quantified anchor")
            if prev is not None and prev.text == "-}":
                f.add("quantified exclusion")
            if prev is not None and prev.text == ")":
                f.add("quantified group")
    defined = set()
    for item in split_top(sec.get("DEFINE", [])):
        if item:
            defined.add(ident(item[0]) if item[0].kind == "qid" else item[0].up)
    if pvars - defined:
        f.add("pattern variable without DEFINE (always true)")

    for name in ("MEASURES", "DEFINE"):
        ex = sec.get(name, [])
        type_pos = set()  # the target type of CAST(x AS type), e.g. varchar(7)
        for i, t in enumerate(ex):
            if t.up in ("CAST", "TRY_CAST") and i + 1 < len(ex) and ex[i + 1].text == "(":
                close = match_paren(ex, i + 1)
                depth = 0
                for j in range(i + 1, close):
                    depth += ex[j].text == "("
                    depth -= ex[j].text == ")"
                    if depth == 1 and ex[j].up == "AS":
                        type_pos.update(range(j + 1, close))
        for i, t in enumerate(ex):
            u = t.up
            call = (i + 1 < len(ex) and ex[i + 1].text == "(" and t.kind == "id"
                    and i not in type_pos)
            if u in ("RUNNING", "FINAL") and t.kind == "id":
                f.add(u + " semantics")
            if call and u in _NAVIGATION:
                close = match_paren(ex, i + 1)
                inner = ex[i + 2:close]
                args = split_top(inner)
                if len(args) > 1:
                    f.add(("logical" if u in ("FIRST", "LAST") else "physical")
                          + " navigation offset")
                if u in ("PREV", "NEXT") and any(x.up in ("FIRST", "LAST") for x in inner):
                    f.add("nested navigation PREV/NEXT(FIRST/LAST(...))")
                f.add(u + "()")
                if any(x.up == "CLASSIFIER" for x in inner):
                    f.add("navigation over CLASSIFIER()")
            elif call and u == "CLASSIFIER":
                close = match_paren(ex, i + 1)
                f.add("CLASSIFIER(var)" if close > i + 2 else "CLASSIFIER()")
            elif call and u == "MATCH_NUMBER":
                f.add("MATCH_NUMBER()")
            elif call and u in _AGGREGATES:
                f.add("aggregate in %s (%s)" % (name, t.text.lower()))
            elif call and u == "CAST":
                f.add("CAST")
            elif call and u == "SELECT":
                pass
            elif call and u not in _SPECIAL_CALLS and u not in ("IN", "AND", "OR", "NOT",
                                                                  "AS"):
                f.add("scalar function (%s)" % t.text.lower())
            if t.text == "||":
                f.add("string concatenation ||")
            if u == "IN" and t.kind == "id":
                f.add("IN predicate")
            if u == "SELECT":
                f.add("subquery in " + name)
            if t.kind in ("id", "qid") and i + 2 < len(ex) and ex[i + 1].text == ".":
                f.add("labelled column reference var.col")
        if name == "DEFINE" and any(x.up in ("CLASSIFIER",) for x in ex):
            f.add("CLASSIFIER() in DEFINE")
    return sorted(f)


def rewrite_source(sql):
    """Replace the FROM (VALUES ...) t(cols) subquery by t.

    -> (query, input table, notes, reason to skip or None); raises Unsupported when the
    query does not read exactly one VALUES table."""
    notes = set()
    toks = sql_tokens(sql)
    if toks[0].up == "WITH":
        raise Unsupported("WITH clause (common table expressions) instead of one "
                          "VALUES subquery")
    frm = find_top_from(toks)
    op = frm + 1
    if toks[op].text != "(":
        raise Unsupported("FROM is not a parenthesized VALUES subquery")
    cl = match_paren(toks, op)
    inner = toks[op + 1:cl]
    if inner[0].up == "VALUES":
        rows = values_rows(inner[1:], notes)
    elif ([t.up for t in inner[:4]] == ["SELECT", "*", "FROM", "("]
          and match_paren(inner, 3) == len(inner) - 3
          and [t.up for t in inner[-2:]] == ["WHERE", "FALSE"]
          and inner[4].up == "VALUES"):
        values_rows(inner[5:-3], notes)  # must still be literals
        rows = []
        notes.add("input is (SELECT * FROM (VALUES ...) WHERE false): an empty table")
    else:
        raise Unsupported("FROM subquery is not VALUES")
    j = cl + 1
    if toks[j].up == "AS":
        j += 1
    columns = None
    end = cl
    if j < len(toks) and toks[j].kind in ("id", "qid") and toks[j].up != "MATCH_RECOGNIZE":
        end = j
        if j + 1 < len(toks) and toks[j + 1].text == "(":
            close = match_paren(toks, j + 1)
            columns = [ident(x[0]) for x in split_top(toks[j + 2:close])]
            end = close
    width = len(rows[0]) if rows else None
    if columns is None:
        if width is None:
            raise Unsupported("empty VALUES without column names")
        columns = ["_col%d" % k for k in range(width)]
        notes.add("VALUES without a column alias: Trino names its columns _col0, _col1, ...")
    for r in rows:
        if len(r) != len(columns):
            raise Unsupported("VALUES row width differs from column list")
    query = normalize_sql(sql[:toks[op].start] + "t" + sql[toks[end].end:])
    qt = sql_tokens(query)
    if sum(1 for t in qt if t.up == "MATCH_RECOGNIZE") > 1 or any(t.up == "VALUES" for t in qt):
        raise Unsupported("reads several VALUES tables (MATCH_RECOGNIZE results cross-joined)")
    table = {"columns": columns, "rows": rows}
    if not any(t.up == "MATCH_RECOGNIZE" for t in qt):
        if any(t.up == "WINDOW" for t in qt) and any(t.up == "MEASURES" for t in qt):
            return query, table, notes, ("row pattern recognition in a WINDOW clause "
                                         "(measures OVER a window), not MATCH_RECOGNIZE")
        raise Unsupported("no MATCH_RECOGNIZE")
    skip = None
    o, c = mr_clause(qt)
    if any(t.up == "SELECT" for t in qt[o:c]):
        skip = "scalar/IN/EXISTS subqueries inside MEASURES or DEFINE"
    return query, table, notes, skip


def build_case(method, ordinal, line, comments, java_query, expect):
    case = {"name": "%s_%d" % (method, ordinal), "java_method": method, "java_line": line}
    comment = " ".join(c for c in comments if not c.startswith("/*")).strip()
    if comment:
        case["comment"] = comment
    if java_query is None:  # the Java assertion itself was not understood
        case.update(input=None, query=None, expected=None, features=[], skip=expect)
        return case
    skips = []
    notes = set()
    input_table = None
    try:
        query, input_table, notes, why = rewrite_source(java_query)
        if why:
            skips.append(why)
    except Unsupported as e:
        skips.append(str(e))
        query = normalize_sql(java_query)
    case["input"] = input_table
    case["query"] = query
    qt = sql_tokens(query)
    try:
        cols = output_columns(qt, input_table["columns"] if input_table else None)
    except Unsupported as e:
        cols = None
        skips.append("output columns not derived: %s" % e)
    kind = expect["kind"]
    exp = {}
    if kind == "rows":
        exp = {"columns": cols, "rows": None, "ordered": expect["ordered"]}
        try:
            vt = sql_tokens(expect["values"])
            if vt[0].up != "VALUES":
                raise Unsupported("expected result is not a VALUES list")
            exp["rows"] = values_rows(vt[1:], notes)
            widths = sorted({len(r) for r in exp["rows"]})
            if cols is not None and widths != [len(cols)]:
                raise Unsupported("%d output columns but expected rows of width %s"
                                  % (len(cols), widths))
        except Unsupported as e:
            skips.append("extractor: %s" % e)
            exp["java_expected"] = expect["values"]
    elif kind == "empty":
        exp = {"empty": True, "columns": cols}
    elif kind == "error":
        exp = {"error": expect.get("message")}
        if expect.get("match", "exact") != "exact":
            exp["error_match"] = expect["match"]
    else:
        skips.append("extractor: assertion without a result check")
    if expect["extra"]:
        exp["java_checks"] = expect["extra"]
    case["expected"] = exp
    try:
        case["features"] = features(qt)
    except Unsupported:
        case["features"] = []
    if notes:
        case["notes"] = sorted(notes)
    if skips:
        case["skip"] = "; ".join(skips)
        if any(x.startswith("extractor") for x in skips):
            print("warning: %s: %s" % (case["name"], case["skip"]), file=sys.stderr)
    return case


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build(paths, source=None):
    """The corpus for one or more Java test files (the first one names the corpus).

    Cases of the first file are named <method>_<n>; cases of further files are prefixed by
    their class name (<Class>.<method>_<n>)."""
    cases, sources = [], []
    for k, path in enumerate(paths):
        with open(path, "rb") as fh:
            raw = fh.read()
        base = os.path.basename(path)
        file_cases = []
        for a in extract_java(raw.decode("utf-8")):
            case = build_case(*a)
            if k:
                case["name"] = os.path.splitext(base)[0] + "." + case["name"]
            case = dict([("name", case.pop("name")), ("java_file", base)] + list(case.items()))
            file_cases.append(case)
        sources.append({"file": SOURCE_DIR + base, "git_blob_sha1": git_blob_sha1(raw),
                        "cases": len(file_cases)})
        cases += file_cases
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    return {
        "source": source or sources[0]["file"],
        "sources": sources,
        "generator": "python tests/trino_cases.py " + " ".join(
            os.path.basename(p) for p in paths) + " -o tests/data/sql_standard_trino.json",
        "format": {
            "name": "<Java test method>_<n>: the n-th assertion of that method (1-based); "
                    "cases of further files are prefixed by their class name",
            "input": "the VALUES table the query reads as t: column names and rows",
            "query": "Trino's query with the VALUES subquery replaced by t, String.format "
                     "placeholders filled in, whitespace runs collapsed",
            "expected": "{columns, rows, ordered} (rows compared as a multiset unless "
                        "ordered), {empty: true}, or {error: the message Trino raises}",
            "values": "CAST(x AS t) -> x, VARCHAR 'a' -> \"a\", BIGINT '1' -> 1, 4e0 -> 4.0, "
                      "ARRAY[...] -> list, SQL NULL -> null; Trino also checks column types, "
                      "which are not recorded",
            "features": "MATCH_RECOGNIZE features the query uses (derived from its text)",
            "skip": "present when the case cannot run against one input table; the "
                    "reason is given",
        },
        "cases": cases,
    }


def _scalar(v):
    return not isinstance(v, (dict, list))


def to_json(v, pad=""):
    """JSON with one case field a line and one table row a line."""
    if isinstance(v, dict):
        if not v:
            return "{}"
        inner = pad + " "
        return "{\n" + ",\n".join(
            inner + json.dumps(k) + ": " + to_json(x, inner) for k, x in v.items()
        ) + "\n" + pad + "}"
    if isinstance(v, list):
        if all(_scalar(x) for x in v):
            return json.dumps(v, ensure_ascii=False)
        if all(isinstance(x, list) and all(not isinstance(y, dict) for y in x) for x in v):
            inner = pad + " "
            return "[\n" + ",\n".join(inner + json.dumps(x, ensure_ascii=False) for x in v) \
                + "\n" + pad + "]"
        inner = pad + " "
        return "[\n" + ",\n".join(inner + to_json(x, inner) for x in v) + "\n" + pad + "]"
    return json.dumps(v, ensure_ascii=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("java", nargs="+",
                    help="local copies of TestRowPatternMatching.java (first) and, "
                         "optionally, further Trino MATCH_RECOGNIZE test files")
    ap.add_argument("-o", "--output", help="JSON file to write (default: stdout)")
    ap.add_argument("--source", help="text of the 'source' field")
    args = ap.parse_args(argv)
    doc = build(args.java, args.source)
    text = to_json(doc) + "\n"
    assert json.loads(text) == doc
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    c = doc["cases"]
    exp = [x["expected"] or {} for x in c]
    print("%d cases: %d with expected rows, %d empty, %d error; %d skip" % (
        len(c), sum("rows" in e for e in exp), sum("empty" in e for e in exp),
        sum("error" in e for e in exp), sum("skip" in x for x in c)), file=sys.stderr)


if __name__ == "__main__":
    main()
