"""``colcep patterns``: the built-in patterns (:mod:`colcep.tools.examples`), and what ``--pattern``
names: built-in names, Python files that define ``pattern``, JSON pattern documents, several at once."""
from __future__ import annotations

import argparse
import json
import os
import runpy
from pathlib import Path
from typing import Any

from colcep.errors import InputError
from colcep.pattern import Pattern
from colcep.tools.examples import EXAMPLES, get_example


def _load_patterns(spec: str) -> tuple[dict[str, Pattern], str, dict[str, Any]]:
    """``--pattern``: one pattern (a built-in name or a Python file), several separated by
    commas, ``desk`` (twenty tick signals, ``colcep.tools.examples.desk_patterns``) or a JSON file of
    pattern documents (an object of name -> pattern, or a list of them, each named by a ``"name"``
    beside its fields, else by the file and its place). Returns the patterns by name,
    a description and the defaults they declare (output columns: those of all of them)."""
    if spec == "desk":
        from colcep.tools.examples import desk_patterns

        return desk_patterns(), "twenty tick signals: the five benchmark families, four variants each", \
            {"key": "name", "time": "ts", "columns": ["price", "volume"]}
    if spec.endswith(".json"):
        path = Path(spec)
        if not path.is_file():
            raise InputError(f"pattern file {spec!r} does not exist")
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and "stages" not in doc:  # name -> pattern document
            items = [(str(n), d) for n, d in doc.items()]
        else:  # a list of documents, or one: named by their "name", else by the file and their place
            docs = doc if isinstance(doc, list) else [doc]
            items = [((d.get("name") if isinstance(d, dict) else None) or
                      (path.stem if len(docs) == 1 else f"{path.stem}_{i}"), d) for i, d in enumerate(docs)]
        pats = {}
        for name, d in items:
            if name in pats:
                raise InputError(f"{spec} names the pattern {name!r} twice")
            pats[name] = Pattern.from_json({k: v for k, v in d.items() if k != "name"} if isinstance(d, dict) else d)
        if not pats:
            raise InputError(f"{spec} holds no pattern")
        return pats, f"{len(pats)} patterns from {path.name}", {}
    parts = [spec] if Path(spec).exists() else [p for p in spec.split(",") if p]
    loaded = [(p, *_load_pattern(p)) for p in parts]
    if len(loaded) == 1:
        name, pat, desc, defaults = loaded[0]
        return {name: pat}, desc, defaults
    names = [Path(p).stem if p.endswith(".py") else p for p, *_ in loaded]
    if len(set(names)) < len(names):
        raise InputError(f"--pattern names a pattern twice: {spec!r}")
    defaults: dict[str, Any] = {}
    for name, (_, _, _, d) in zip(names, loaded):
        for k in ("key", "time", "seq"):
            if k in d and defaults.setdefault(k, d[k]) != d[k]:
                raise InputError(f"the patterns declare different {k} columns ({defaults[k]!r}, then {d[k]!r} for "
                                 f"{name!r}); give --{k} to scan them together")
        if d.get("columns") is not None:
            defaults["columns"] = list(dict.fromkeys([*defaults.get("columns", []), *d["columns"]]))
    return {n: pat for n, (_, pat, _, _) in zip(names, loaded)}, ", ".join(names), defaults


def _load_pattern(spec: str) -> tuple[Pattern, str, dict[str, Any]]:
    """A built-in example name or a Python file defining ``pattern``; returns the pattern,
    a description and the defaults it declares (key, time, seq, columns)."""
    if spec.endswith(".py") or os.path.sep in spec:
        path = Path(spec)
        if not path.is_file():
            raise InputError(f"pattern file {spec!r} does not exist")
        ns = runpy.run_path(str(path))
        pat = ns.get("pattern", ns.get("PATTERN"))
        if not isinstance(pat, Pattern):
            raise InputError(f"{spec} must define `pattern = Pattern.begin(...)...` (a colcep Pattern)")
        defaults = {k.lower(): ns[k] for k in ("KEY", "TIME", "SEQ", "COLUMNS") if k in ns}
        doc = (ns.get("__doc__") or "").strip().splitlines()
        return pat, doc[0] if doc else "", defaults
    try:
        ex = get_example(spec)
    except KeyError as exc:
        raise InputError(f"{exc.args[0]}, or give a Python file that defines `pattern`") from None
    return ex.pattern, ex.description, {"key": ex.key, "time": ex.time, "columns": list(ex.columns)}


def add_parser(sub) -> None:
    """The ``patterns`` subcommand."""
    sub.add_parser("patterns", help="list the built-in patterns", description="List the built-in patterns.")


def run(a: argparse.Namespace) -> int:
    """List the built-in patterns; the exit status."""
    w = max(len(k) for k in EXAMPLES)
    for name, ex in EXAMPLES.items():
        print(f"{name:<{w}}  {ex.description}")
    print(f"{'desk':<{w}}  twenty tick signals in one pass (P1-P5, four variants each; "
          "colcep.tools.examples.desk_patterns)")
    return 0
