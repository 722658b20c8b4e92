"""The package's layout: the top level holds the user's vocabulary and the entry point, every
other module sits in its floor's folder; no module imports one that imports it back, layers import
downwards only, the kernels import nothing from colcep, and the public names stay where users
import them."""
import ast
from pathlib import Path

import pytest

import colcep

TOP = Path(colcep.__file__).parent

# a layer may import from itself and the layers after it in this list, never from one before it
LAYERS = ["colcep.cli", "colcep.tools", "colcep.spark", "colcep.lang", "colcep.windows", "colcep.engine", "colcep.kernels"]
# the top level (colcep/*.py): the user's vocabulary, which every layer but the kernels may use, and
# the entry point (colcep/__init__.py: `import colcep as cc`; the command line's is colcep.cli)
VOCABULARY = ["colcep.pattern", "colcep.expr", "colcep.skip", "colcep.stages", "colcep.errors", "colcep.durations",
              "colcep.version"]
ENTRY_POINTS = ["colcep"]
# what the vocabulary may import besides itself: the kernels' integer codes (skip strategies) and the
# JSON codec (Pattern.to_json / from_json), which builds patterns with the class it is handed
VOCABULARY_USES = ["colcep.kernels.codes", "colcep.lang.json_format"]
# the upward calls there are: an entry point handed a Spark DataFrame runs it on Spark (colcep.sql
# from the SQL package's entry, whose parser and runner modules colcep.spark.sql imports;
# SaseQuery.match; colcep.windows' assign, aggregate and ohlc), imported inside the call that needs it
SANCTIONED = ["colcep.lang.sase -> colcep.spark.batch", "colcep.lang.sql -> colcep.spark.sql",
              "colcep.windows.api -> colcep.spark.windows"]


def _modules() -> dict[str, Path]:
    mods = {}
    for p in TOP.rglob("*.py"):
        rel = p.relative_to(TOP).with_suffix("")
        if rel.parts[0] == "kernels":
            continue
        name = ".".join(("colcep",) + rel.parts)
        mods[name.removesuffix(".__init__")] = p
    import colcep.kernels as k
    for p in Path(k.__path__[0]).glob("*.py"):
        mods["colcep.kernels" if p.stem == "__init__" else f"colcep.kernels.{p.stem}"] = p
    return mods


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Every colcep module each module imports, at any depth of its code (function-level and
    TYPE_CHECKING imports count too)."""
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            graph[m] |= {t for t in targets if t in mods and t != m}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    graph = _imports(_modules())
    assert len(graph) > 40
    assert _cycles(graph) == []


def _layer(m: str) -> int | None:
    for i, prefix in enumerate(LAYERS):
        if m == prefix or m.startswith(prefix + "."):
            return i
    return None


def test_top_level_holds_the_vocabulary_and_the_entry_point():
    """A module that is neither vocabulary nor the entry point belongs in a floor's folder."""
    files = {".".join(("colcep",) + ((p.stem,) if p.stem != "__init__" else ())) for p in TOP.glob("*.py")}
    assert sorted(files) == sorted(VOCABULARY + ENTRY_POINTS)
    folders = {f"colcep.{p.name}" for p in TOP.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(folders - {"colcep.kernels"}) == sorted(set(LAYERS) - {"colcep.kernels"})  # kernels/: a source tree's


def test_the_vocabulary_knows_no_floor():
    """Patterns, expressions, skip strategies and errors know nothing of the engine, the windows,
    Spark, the tools or the command line."""
    for m, targets in _imports(_modules()).items():
        if m in VOCABULARY:
            allowed = set(VOCABULARY + VOCABULARY_USES)
            assert targets <= allowed, (m, sorted(targets - allowed))


def test_layers_import_downwards_only():
    """Front-ends and windows know nothing of Spark, the engine nothing of front-ends, windows or
    Spark, kernels nothing of colcep."""
    bad = []
    for m, targets in _imports(_modules()).items():
        lm = _layer(m)
        for t in targets:
            lt = _layer(t)
            if lm is not None and lt is not None and lt < lm:
                bad.append(f"{m} -> {t}")
    assert sorted(bad) == SANCTIONED


def test_kernels_import_nothing_from_colcep():
    """The lowest floor: the kernels import only each other (where they are cached is the engine's
    colcep.engine.kernel_cache, whose locator colcep/__init__.py installs)."""
    mods = _modules()
    for m, targets in _imports(mods).items():
        if m.startswith("colcep.kernels"):
            assert {t for t in targets if not t.startswith("colcep.kernels")} == set(), m
    for m, p in mods.items():  # nor reach above their folder (from .. import x), whatever x is
        if m.startswith("colcep.kernels"):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.ImportFrom):
                    assert node.level <= 1 and not (node.module or "").startswith("colcep"), (m, ast.dump(node))
                elif isinstance(node, ast.Import):
                    assert not any(a.name.split(".")[0] == "colcep" for a in node.names), m


@pytest.mark.parametrize("name", ["Pattern", "match", "Matcher", "sql", "sase", "sase_match", "compile",
                                  "ohlc", "SqlError", "SaseQuery", "PatternJSONError", "__version__"])
def test_public_names_stay_at_the_top(name):
    assert hasattr(colcep, name)


def test_spark_names_stay_in_colcep_spark():
    import colcep.spark as cs
    for name in ("match", "match_parquet", "match_stream", "sql", "ship", "local_session", "executor_report",
                 "default_partitions", "state_report", "KeyedStream", "arrow_spec", "ScanMetrics"):
        assert hasattr(cs, name), name
