"""The kernels' integer vocabulary, defined once: the compiler, the condition lowering, the
skip strategies and the Matcher import these names."""
import numpy as np

# transition actions (Flink's StateTransitionAction)
TAKE, IGNORE, PROCEED = 0, 1, 2
# kinds of states
NORMAL, FINAL, STOP, PENDING = 0, 1, 2, 3
# after-match skip strategies
NO_SKIP, SKIP_TO_NEXT, SKIP_PAST_LAST_EVENT, SKIP_TO_FIRST, SKIP_TO_LAST = 0, 1, 2, 3, 4
# kinds of lowered conditions: a mask row, a bytecode program, the negation of another condition
COND_MASK, COND_PROGRAM, COND_NOT = 0, 1, 2
# run_batch status codes: status[0]; status[1] the key; status[2] the figure that was over
OK, ERR_CAPACITY, ERR_NODES, ERR_INTERRUPTED, ERR_OUTPUT = 0, 1, 2, 3, 4
# time: every int64 is a valid event time; a window deadline past the int64 range saturates
TIME_MAX = np.int64(np.iinfo(np.int64).max)
# run_batch's ``tick_ts``: after the rows, time advances to it with no event (a watermark);
# TIME_MAX is the end of input (every windowed run times out); NO_TICK: no such step
NO_TICK = np.int64(np.iinfo(np.int64).min)
# "no such event": an index past every key's events
BIG = np.int64(2**62)
