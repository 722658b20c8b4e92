"""What a Pattern is made of: stages, their quantifiers, and how a stage connects to the one
before it (Flink's ConsumingStrategy). Plain values, shared by the builder (:mod:`colcep.pattern`),
its document form (:mod:`colcep.lang.json_format`) and the compiler."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from colcep.expr import Expr

# connect kinds (Flink's ConsumingStrategy of a stage)
BEGIN, NEXT, FOLLOWED_BY, FOLLOWED_BY_ANY, NOT_NEXT, NOT_FOLLOWED_BY = (
    "begin", "next", "followed_by", "followed_by_any", "not_next", "not_followed_by")
# inner contiguity of looping / times quantifiers
RELAXED, CONSECUTIVE, ALLOW_COMBINATIONS = "relaxed", "consecutive", "allow_combinations"


@dataclass(frozen=True)
class Quantifier:
    """How often a stage repeats: ``kind`` is single | times | looping; ``lo``..``hi``
    events (hi None = unbounded)."""

    kind: str = "single"
    lo: int = 1
    hi: int | None = 1
    optional: bool = False
    greedy: bool = False
    inner: str = RELAXED
    within: Any = None  # times(..., within=): the gap between a repetition's event and the event before it


@dataclass(frozen=True, eq=False)
class Stage:
    """One named element of a pattern (Flink: a Pattern in the chain)."""

    name: str
    connect: str
    condition: Expr | None = None
    quantifier: Quantifier = field(default_factory=Quantifier)
    until: Expr | None = None
    group: Any = None         # a group stage's Pattern
    alternatives: Any = None  # an any_of stage: a tuple of Patterns, one of which matches
    gap: Any = None           # within(w, between="previous_and_current"): the most from the previous event to this one

    @property
    def is_negation(self) -> bool:
        return self.connect in (NOT_NEXT, NOT_FOLLOWED_BY)

    @property
    def is_group(self) -> bool:
        """A stage made of patterns (a group or an alternation) rather than one condition."""
        return self.group is not None or self.alternatives is not None

    @property
    def is_alternation(self) -> bool:
        return self.alternatives is not None

    @property
    def children(self) -> tuple:
        """The patterns inside the stage: its group, its alternatives, or none."""
        if self.alternatives is not None:
            return self.alternatives
        return (self.group,) if self.group is not None else ()

    def describe(self) -> str:
        if self.alternatives is not None:
            return f"alternation stage {self.name!r}"
        return f"group stage {self.name!r}" if self.group is not None else f"stage {self.name!r}"
