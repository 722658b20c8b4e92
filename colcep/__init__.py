"""colcep: complex event processing with Flink CEP's semantics on columnar data."""
from colcep.version import __version__  # noqa: F401
from colcep.engine import kernel_cache as _kernel_cache
from colcep.engine import shipped as _shipped

_kernel_cache.install()  # first: the kernel modules imported below are cached in colcep's own folder,
_shipped.install()  # or loaded from the build colcep ships compiled
from colcep.errors import (CapacityError, ColcepError, ColcepWarning, InputError, PatternError, SnapshotError,
                     WindowSpecError)
from colcep.expr import Expr, avg, col, count, first, last, lit, max, min, prev, rolling, sum
from colcep.engine.matcher import Matcher, match
from colcep.engine.many import ManyMatcher, match_many
from colcep.engine.program import CompiledPattern, compile
from colcep.pattern import Pattern
from colcep.lang.json_format import PatternJSONError
from colcep.lang.sase import SaseError, SaseQuery, sase, sase_match
from colcep.lang.sql import SqlError, sql
from colcep.windows import triggers
from colcep.windows import Count, Global, Session, Sliding, Tumbling, WindowAggregator, aggregate, assign, ohlc
from colcep.skip import AfterMatchSkipStrategy, NoSkip, SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext

__all__ = ["Pattern", "CompiledPattern", "compile", "Matcher", "match", "ManyMatcher", "match_many", "Expr", "col", "lit", "first", "last", "sum",
           "count", "avg", "min", "max", "prev", "rolling",
           "AfterMatchSkipStrategy", "NoSkip", "SkipToNext", "SkipPastLastEvent", "SkipToFirst", "SkipToLast",
           "Tumbling", "Sliding", "Session", "Count", "Global", "assign", "aggregate", "ohlc", "WindowAggregator", "triggers",
           "sase", "sase_match", "SaseQuery", "sql",
           "ColcepError", "PatternError", "PatternJSONError", "SaseError", "SqlError", "InputError", "CapacityError",
           "SnapshotError", "WindowSpecError", "ColcepWarning"]
