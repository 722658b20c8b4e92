"""After-match skip strategies (Flink's ``AfterMatchSkipStrategy``): a closed set of small
frozen classes, lowered to an integer code (and a stage index) for the kernels."""
from __future__ import annotations

from dataclasses import dataclass

from colcep.kernels.codes import NO_SKIP, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST, SKIP_TO_NEXT


class AfterMatchSkipStrategy:
    """Which partial matches are discarded once a match is emitted."""

    code: int = NO_SKIP
    stage: str | None = None

    def __init_subclass__(cls, **kw):  # the set is closed: only the five below
        if cls.__module__ != __name__:
            raise TypeError("AfterMatchSkipStrategy is a closed set; use one of colcep's five strategies")
        super().__init_subclass__(**kw)


@dataclass(frozen=True)
class NoSkip(AfterMatchSkipStrategy):
    """Every match is emitted; nothing is discarded (Flink's default)."""

    code = NO_SKIP


@dataclass(frozen=True)
class SkipToNext(AfterMatchSkipStrategy):
    """Discard partial matches that started with the same event as the emitted match."""

    code = SKIP_TO_NEXT


@dataclass(frozen=True)
class SkipPastLastEvent(AfterMatchSkipStrategy):
    """Discard partial matches that started before the emitted match's last event."""

    code = SKIP_PAST_LAST_EVENT


@dataclass(frozen=True)
class SkipToFirst(AfterMatchSkipStrategy):
    """Discard partial matches that started before the first event of ``stage`` in the
    emitted match (no skip when the stage has no event in it)."""

    stage: str
    code = SKIP_TO_FIRST


@dataclass(frozen=True)
class SkipToLast(AfterMatchSkipStrategy):
    """Discard partial matches that started before the last event of ``stage`` in the
    emitted match (no skip when the stage has no event in it)."""

    stage: str
    code = SKIP_TO_LAST
