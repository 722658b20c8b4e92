"""colcep: complex event processing with Flink CEP's semantics on columnar data."""
from .errors import (CapacityError, ColcepError, ColcepWarning, InputError, PatternError, SnapshotError,
                     WindowSpecError)
from .expr import Expr, avg, col, count, first, last, lit, max, min, prev, rolling, sum
from .matcher import Matcher, match
from .program import CompiledPattern, compile
from .pattern import Pattern
from .pattern_json import PatternJSONError
from .sase_lang import SaseError, SaseQuery, sase, sase_match
from .sql_match import SqlError, sql
from .windows import Count, Global, Session, Sliding, Tumbling, WindowAggregator, aggregate, assign, ohlc
from .skip import AfterMatchSkipStrategy, NoSkip, SkipPastLastEvent, SkipToFirst, SkipToLast, SkipToNext

__all__ = ["Pattern", "CompiledPattern", "compile", "Matcher", "match", "Expr", "col", "lit", "first", "last", "sum",
           "count", "avg", "min", "max", "prev", "rolling",
           "AfterMatchSkipStrategy", "NoSkip", "SkipToNext", "SkipPastLastEvent", "SkipToFirst", "SkipToLast",
           "Tumbling", "Sliding", "Session", "Count", "Global", "assign", "aggregate", "ohlc", "WindowAggregator",
           "sase", "sase_match", "SaseQuery", "sql",
           "ColcepError", "PatternError", "PatternJSONError", "SaseError", "SqlError", "InputError", "CapacityError",
           "SnapshotError", "WindowSpecError", "ColcepWarning"]
__version__ = "0.1.0"
