"""A key's live runs while it is stepped: the work arrays ``W_*`` (two halves, one list each,
V vectors in an arena), and time arithmetic on a run's window, exact for every int64."""
import numpy as np
from numba import njit

from .codes import TIME_MAX
from .vm import v_init


@njit(cache=True, nogil=True, inline="always")
def expired(t, sts, window):
    """Has the window of a run started at ``sts`` passed at time ``t >= sts``? Exact for every
    int64 (``t - sts >= window`` without overflow)."""
    return window > 0 and sts <= TIME_MAX - window and t >= sts + window


@njit(cache=True, nogil=True, inline="always")
def last_time(sts, window):
    """The last time inside the window of a run started at ``sts`` (saturating)."""
    if window <= 0 or sts > TIME_MAX - window + 1:
        return TIME_MAX
    return sts + window - 1


@njit(cache=True, nogil=True, inline="always")
def deadline(sts, window):
    """When the window of a run started at ``sts`` passes: its timed-out time (saturating)."""
    if sts > TIME_MAX - window:
        return TIME_MAX
    return sts + window


@njit(cache=True, nogil=True, inline="always")
def last_taken(W_v, vs, base):
    """A run's time of its last taken event (a pattern with windows between consecutive events
    keeps it in its V's last group, at ``W_v[vs + base]``, as two exact halves of the int64)."""
    return (np.int64(W_v[vs + base]) << 32) + np.int64(W_v[vs + base + 1])


@njit(cache=True, nogil=True, inline="always")
def set_last_taken(W_v, at, t):
    """Keep ``t`` as the time of a run's last taken event at ``W_v[at]`` (``last_taken``'s form)."""
    W_v[at] = np.float64(t >> 32)
    W_v[at + 1] = np.float64(t & 0xFFFFFFFF)


@njit(cache=True, nogil=True)
def grow_runs(W_state, W_node, W_sts, W_spos, W_wake, W_vs, W_v, v_at, ao, na, cap, vw):
    """Work arrays for ``cap`` runs a half, the current list (``ao``, ``na``) moved to offset 0
    and its V vectors to the first slots of the V arena (two halves of ``2 * cap`` slots, then
    the empty V)."""
    state = np.empty(2 * cap, np.int32)
    node = np.empty(2 * cap, np.int64)
    sts = np.empty(2 * cap, np.int64)
    spos = np.empty(2 * cap, np.int64)
    wake = np.empty(2 * cap, np.int64)
    vs = np.empty(2 * cap, np.int64)
    v = np.empty((4 * cap + 1) * vw, np.float64)
    for i in range(na):
        state[i] = W_state[ao + i]
        node[i] = W_node[ao + i]
        sts[i] = W_sts[ao + i]
        spos[i] = W_spos[ao + i]
        wake[i] = W_wake[ao + i]
        vs[i] = i
        for j in range(vw):
            v[i * vw + j] = W_v[W_vs[ao + i] * vw + j]
    v_init(v[4 * cap * vw:])
    v_at[0] = na
    v_at[1] = 0
    return state, node, sts, spos, wake, vs, v


@njit(cache=True, nogil=True, inline="always")
def move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, src, dst):
    W_state[dst] = W_state[src]
    W_node[dst] = W_node[src]
    W_sts[dst] = W_sts[src]
    W_spos[dst] = W_spos[src]
    W_wake[dst] = W_wake[src]
    W_vs[dst] = W_vs[src]


@njit(cache=True, nogil=True, _nrt=False)
def lower_bound(a, lo, hi, x):
    """First index in ``a[lo:hi]`` (sorted) whose value is >= ``x``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def short_of_room(need, n_all, nh, cap, buf, done, Q, E, max_nodes, per_run):
    """Whether the next event of a key with ``n_all`` runs (listed and parked) and ``nh`` held
    matches, which may make ``need`` nodes and runs, lacks room in the buffer or the work arrays,
    or would take the buffer's live nodes past ``max_nodes`` (the bound, checked at every event
    for every run: where a batch is cut does not change where it is exceeded)."""
    n_row, meta = buf[0], buf[4]
    return (n_row.shape[0] - meta[0] + meta[2] < need or need > cap or nh + n_all + need > Q[0].shape[0]
            or nh + 2 * n_all + need > E[0].shape[0] or need > done[0].shape[0]
            or meta[0] - meta[2] + (n_all + 1) * per_run > max_nodes)


@njit(cache=True, nogil=True, inline="always")
def turn_v_arena(W_v, W_vs, v_at, ao, na, need, cap, vw):
    """When ``need`` more V slots would pass the end of the V arena's half in use, the live runs'
    (``ao``, ``na``) V move to the start of the other half."""
    if v_at[0] + need <= (v_at[1] + 1) * 2 * cap:
        return
    w = (1 - v_at[1]) * 2 * cap
    for i in range(ao, ao + na):
        for jj in range(vw):
            W_v[w * vw + jj] = W_v[W_vs[i] * vw + jj]
        W_vs[i] = w
        w += 1
    v_at[1] = 1 - v_at[1]
    v_at[0] = w


@njit(cache=True, nogil=True, _nrt=False)
def move_run_call(W_state, W_node, W_sts, W_spos, W_wake, W_vs, src, dst):
    """``move_run`` as a function of its own, compiled once (the generated steps call it at many
    places: inlined, it would be typed again at each)."""
    move_run(W_state, W_node, W_sts, W_spos, W_wake, W_vs, src, dst)
