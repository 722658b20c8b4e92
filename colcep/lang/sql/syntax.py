"""What every part of the SQL front-end shares: its error, and reading sqlglot's nodes."""
from __future__ import annotations

from typing import Any

from colcep.errors import PatternError


class SqlError(PatternError):
    """A MATCH_RECOGNIZE query colcep cannot parse or run; names the clause and the token."""


def _err(clause: str, token: Any, message: str) -> SqlError:
    try:
        tok = token.sql() if hasattr(token, "sql") else str(token)
    except Exception:  # noqa: BLE001 - sqlglot cannot print some partial nodes
        tok = type(token).__name__.upper()
    tok = " ".join(tok.split())
    return SqlError(f"{clause}: {message} (at {tok!r})" if tok else f"{clause}: {message}")


def case_branches(node) -> list[tuple[Any, Any]]:
    """A CASE's (condition, value) branches in order, its ELSE (NULL without one) last with no
    condition: ``CASE x WHEN v THEN ...`` compares ``x = v``."""
    from sqlglot import exp
    out: list[tuple[Any, Any]] = []
    for branch in node.args.get("ifs") or []:
        cond = branch.this if node.this is None else exp.EQ(this=node.this.copy(), expression=branch.this.copy())
        out.append((cond, branch.args["true"]))
    default = node.args.get("default")
    return out + [(None, default if default is not None else exp.Null())]


def function_name(f) -> str:
    """A sqlglot function node's SQL name, upper case (``PREV``, ``MATCH_ROWTIME``...)."""
    from sqlglot import exp
    return f.name.upper() if isinstance(f, exp.Anonymous) else type(f).__name__.upper()


def function_args(f) -> list:
    """A sqlglot function node's arguments, in order."""
    from sqlglot import exp
    if isinstance(f, exp.Anonymous):
        return list(f.expressions)
    return [f.this] + ([f.expression] if f.expression is not None else [])
