"""The exceptions colcep raises; each message names the stage, column, key or value at fault."""


class ColcepError(Exception):
    """Base class of colcep's errors."""


class PatternError(ColcepError, ValueError):
    """An invalid pattern or condition (Flink: MalformedPatternException); says which rule."""


class InputError(ColcepError, ValueError):
    """Input data colcep cannot process as asked: missing or mistyped columns, nulls or
    unsorted timestamps. Names the column, and the key and row where one is at fault."""


class CapacityError(ColcepError, RuntimeError):
    """A key holds more live partial matches than the configured bound allows."""


class WindowSpecError(ColcepError, ValueError):
    """An invalid window specification (size, slide, offset or gap)."""


class SnapshotError(ColcepError, ValueError):
    """Snapshot bytes that cannot be restored: corrupt, of a newer format, or taken with
    another pattern. Nothing is restored."""


class ColcepWarning(UserWarning):
    """Something colcep can run but that is probably not what was meant (e.g. a time unit)."""
