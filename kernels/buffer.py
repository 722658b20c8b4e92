"""The shared match buffer as integer arrays.

A node is one event taken into one stage: ``row`` (the event's global position), ``stage``
and ``parent`` (the node taken before it, -1 at the start of a match). Runs that split
share their common prefix, so the buffer is a forest whose paths are partial matches; a
run points at its last node and its match is the walk back to the root (Flink's
``extractPatterns`` over a single compatible path). ``ref`` counts the runs, held matches
and child nodes pointing at a node; a node whose count drops to zero is released, with its
parent, onto a free list and its slot is reused by the next allocation (the paper's object
pool). ``meta`` holds ``[high_water, free_head, free_count, call_high, quarantine_head,
quarantine_count, max_slots, 0]`` (``META_*``).

A call that may have to be undone (``Matcher.process``: a failed call leaves the state as it
was) opens with ``open_call``, which records the high water ``call_high``. Until
``close_call``, a node below it that is freed is not put on the free list but in a quarantine
(linked through ``ref`` as ``-2 - next``), so no slot of a node that was live when the call
opened is written but its ``ref``: ``row``, ``stage`` and ``parent`` of every such node stay
as they were. ``close_call`` (success) splices the quarantine, as it is, onto a second free
list linked the same way (``freed_head``; allocation takes from it once the first is empty):
a constant time, where moving each slot onto the first list chased one pointer a freed node
(3.3 s of a trading day's desk, on one thread); ``undo_call`` (failure) recounts every ``ref`` below the
high water from the roots the state had before the call and rebuilds the free list from the
slots they do not reach (time proportional to the buffer, on failure only). Nothing is copied
per call. ``max_slots`` (0: none) bounds ``reserve``: the old and the new arrays together,
while it copies, never exceed it.

Merged runs (SASE+'s merging of equivalent runs) make the forest a DAG: a JOIN node (stage
``JOIN``) stands for the union of two nodes' paths, ``parent`` the first and ``row`` the
second, holding a reference on each. A run or node whose ancestry has a JOIN ends several
paths; ``walk_paths`` enumerates them. The single-path walks (``extract``,
``path_length``, ``compare_paths``) are for join-free paths.
"""
import numpy as np
from numba import njit

META_HIGH, META_FREE, META_NFREE, META_CALL, META_QHEAD, META_QCOUNT, META_MAX = 0, 1, 2, 3, 4, 5, 6
META_FREED, META_QTAIL = 7, 8
META_LEN = 10
JOIN = -2  # the stage of a JOIN node
NODE_BYTES = 8 + 4 + 8 + 4  # row, stage, parent, ref


def new_meta():
    """``meta`` of an empty buffer."""
    return np.array([0, -1, 0, 0, -1, 0, 0, -1, -1, 0], np.int64)


def new_buffer(capacity: int = 1024):
    """Empty node arrays: (row, stage, parent, ref, meta)."""
    return (np.zeros(capacity, np.int64), np.zeros(capacity, np.int32), np.full(capacity, -1, np.int64),
            np.zeros(capacity, np.int32), new_meta())


@njit(cache=True, nogil=True)
def reserve(n_row, n_stage, n_parent, n_ref, meta, needed):
    """Grow the node arrays (doubling) so that ``needed`` more nodes can be allocated. Under
    ``meta[META_MAX]`` (> 0) the old and new arrays together stay within that many slots: the
    arrays grow less, or not at all (the caller sees too little room and fails the call)."""
    cap = n_row.shape[0]
    avail = cap - meta[META_HIGH] + meta[META_NFREE]
    if avail >= needed:
        return n_row, n_stage, n_parent, n_ref
    new_cap = max(2 * cap, cap + needed + 16)
    if meta[META_MAX] > 0:
        new_cap = min(new_cap, meta[META_MAX] - cap)
        if new_cap - meta[META_HIGH] + meta[META_NFREE] < needed:
            return n_row, n_stage, n_parent, n_ref
    r = np.zeros(new_cap, np.int64)
    s = np.zeros(new_cap, np.int32)
    p = np.full(new_cap, -1, np.int64)
    f = np.zeros(new_cap, np.int32)
    r[:cap] = n_row
    s[:cap] = n_stage
    p[:cap] = n_parent
    f[:cap] = n_ref
    return r, s, p, f


@njit(cache=True, nogil=True, _nrt=False)
def alloc(n_row, n_stage, n_parent, n_ref, meta, row, stage, parent):
    """A new node (capacity must have been reserved); the parent gains a reference."""
    if meta[META_FREE] >= 0:
        i = meta[META_FREE]
        meta[META_FREE] = n_parent[i]
        meta[META_NFREE] -= 1
    elif meta[META_FREED] >= 0:
        i = meta[META_FREED]
        meta[META_FREED] = -2 - n_ref[i]
        meta[META_NFREE] -= 1
    else:
        i = meta[META_HIGH]
        meta[META_HIGH] += 1
    n_row[i] = row
    n_stage[i] = stage
    n_parent[i] = parent
    n_ref[i] = 0
    if parent >= 0:
        n_ref[parent] += 1
    return i


@njit(cache=True, nogil=True, _nrt=False)
def join(n_row, n_stage, n_parent, n_ref, meta, a, b):
    """A JOIN node for the paths of ``a`` and of ``b`` (capacity must have been reserved),
    taking over the caller's reference to each and holding one for the caller."""
    i = alloc(n_row, n_stage, n_parent, n_ref, meta, b, JOIN, -1)
    n_parent[i] = a
    n_ref[i] = 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _free(n_parent, n_ref, meta, node):
    if node < meta[META_CALL]:  # live when the call opened: quarantined, parent kept
        if meta[META_QHEAD] < 0:
            meta[META_QTAIL] = node
        n_ref[node] = -2 - meta[META_QHEAD]
        meta[META_QHEAD] = node
        meta[META_QCOUNT] += 1
        return
    n_parent[node] = meta[META_FREE]
    n_ref[node] = -1  # marks a free slot
    meta[META_FREE] = node
    meta[META_NFREE] += 1


@njit(cache=True, nogil=True, _nrt=False)
def release(n_row, n_stage, n_parent, n_ref, meta, node):
    """Drop one reference to ``node``; free it, and then its ancestors, when unreferenced.
    A JOIN node's second side waits on a stack linked through the JOINs' ``ref`` fields
    (``-2 - next``: no recursion, Numba does not cache recursive functions reliably; and the
    JOIN's ``parent`` stays as it was, see ``open_call``)."""
    stack = -1
    while True:
        while node >= 0:
            n_ref[node] -= 1
            if n_ref[node] > 0:
                break
            parent = n_parent[node]
            if n_stage[node] == JOIN:
                n_ref[node] = -2 - stack
                stack = node
            else:
                _free(n_parent, n_ref, meta, node)
            node = parent
        if stack < 0:
            return
        j = stack
        stack = -2 - n_ref[j]
        node = n_row[j]
        _free(n_parent, n_ref, meta, j)


@njit(cache=True, nogil=True, _nrt=False)
def walk_paths(n_row, n_stage, n_parent, node, walk, write, m_off, nm, e_row, e_stage, ne):
    """Every path ending at ``node`` (a JOIN's first side first): counted, or with ``write``
    appended as records ``m_off[nm]..m_off[nm + 1]`` of ``e_row`` / ``e_stage`` in arrival
    order. Returns ``(paths, events)``, or ``(nm, ne)`` after writing. ``walk`` is scratch
    space for twice the buffer's capacity (a path's nodes from the start, two slots for each
    JOIN it passed from the end: a path's nodes and JOINs are distinct live nodes); a join-free
    path does not use it."""
    length = 0
    x = node
    while x >= 0 and n_stage[x] != JOIN:
        length += 1
        x = n_parent[x]
    if x < 0:  # one path
        if not write:
            return 1, length
        m_off[nm] = ne
        x = node
        for i in range(ne + length - 1, ne - 1, -1):
            e_row[i] = n_row[x]
            e_stage[i] = n_stage[x]
            x = n_parent[x]
        m_off[nm + 1] = ne + length
        return nm + 1, ne + length
    top = walk.shape[0] - 2  # the JOIN passed d-th: walk[top - 2d] the node, walk[top - 2d + 1] = 2 * plen + side
    paths = 0
    events = 0
    plen = 0   # nodes of the current path, leaf first, at walk[:plen]
    sp = 0     # JOINs passed
    cur = node
    while True:
        while cur >= 0 and n_stage[cur] != JOIN:
            walk[plen] = cur
            plen += 1
            cur = n_parent[cur]
        if cur >= 0:
            walk[top - 2 * sp] = cur
            walk[top - 2 * sp + 1] = 2 * plen
            sp += 1
            cur = n_parent[cur]
            continue
        paths += 1
        events += plen
        if write:
            m_off[nm] = ne
            for i in range(plen):
                x = walk[plen - 1 - i]
                e_row[ne + i] = n_row[x]
                e_stage[ne + i] = n_stage[x]
            ne += plen
            nm += 1
            m_off[nm] = ne
        while sp > 0 and walk[top - 2 * sp + 3] & 1:
            sp -= 1
        if sp == 0:
            break
        walk[top - 2 * sp + 3] += 1  # now the JOIN's second side
        plen = walk[top - 2 * sp + 3] >> 1
        cur = n_row[walk[top - 2 * sp + 2]]
    if write:
        return nm, ne
    return paths, events


@njit(cache=True, nogil=True, _nrt=False)
def path_length(n_parent, node):
    n = 0
    while node >= 0:
        n += 1
        node = n_parent[node]
    return n


@njit(cache=True, nogil=True, _nrt=False)
def extract(n_row, n_stage, n_parent, node, rows, stages):
    """Write the match ending at ``node`` into ``rows`` / ``stages`` in arrival order;
    returns its length (the arrays must be long enough: see ``path_length``)."""
    n = path_length(n_parent, node)
    i = n - 1
    while node >= 0:
        rows[i] = n_row[node]
        stages[i] = n_stage[node]
        node = n_parent[node]
        i -= 1
    return n


@njit(cache=True, nogil=True, _nrt=False)
def compare_paths(n_row, n_stage, n_parent, a, b):
    """Compare two matches by their events' positions in arrival order, lexicographically,
    then by the stages the events were taken into (-1, 0 or 1). Walks both paths once from
    the leaves, without allocating; a shared prefix (the same node) ends the walk."""
    return _compare(n_row, n_stage, n_parent, a, b, False)


@njit(cache=True, nogil=True, _nrt=False)
def compare_completed(n_row, n_stage, n_parent, a, b):
    """``compare_paths`` of the two matches that the paths ``a`` and ``b`` become when both take
    one and the same later event into the same stage: where one path's events are a prefix of
    the other's, the longer one comes first (its next event precedes the common one).

    Paths without JOIN nodes only (the dominance test's: under a skip strategy runs never merge).
    That case is found first, walking up from the later last event only as far as the other's
    (events come in arrival order along a path), not both paths to the root: two runs of a
    start waiting in one state, the later made from the earlier's path by further takes."""
    if a >= 0 and b >= 0 and n_row[a] != n_row[b]:
        first, later = (a, b) if n_row[a] < n_row[b] else (b, a)
        y = later
        while y >= 0 and n_row[y] > n_row[first]:
            y = n_parent[y]
        if y == first:  # ``first``'s path is a proper prefix of ``later``'s: the longer first
            return 1 if first == a else -1
    return _compare(n_row, n_stage, n_parent, a, b, True)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _compare(n_row, n_stage, n_parent, a, b, completed):
    la = path_length(n_parent, a)
    lb = path_length(n_parent, b)
    x = a
    for _ in range(la - min(la, lb)):
        x = n_parent[x]
    y = b
    for _ in range(lb - min(la, lb)):
        y = n_parent[y]
    row_cmp = 0
    stage_cmp = 0
    while x != y:  # equal depths; the last difference seen is the first from the root
        if n_row[x] != n_row[y]:
            row_cmp = -1 if n_row[x] < n_row[y] else 1
        if n_stage[x] != n_stage[y]:
            stage_cmp = -1 if n_stage[x] < n_stage[y] else 1
        x = n_parent[x]
        y = n_parent[y]
    if row_cmp != 0:
        return row_cmp
    if la != lb:
        return -1 if (la < lb) != completed else 1
    return stage_cmp


@njit(cache=True, nogil=True)
def live_nodes(n_ref, high):
    """Number of allocated, unreleased nodes."""
    n = 0
    for i in range(high):
        if n_ref[i] >= 0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def min_live_row(n_row, n_stage, n_ref, high):
    """The oldest event position any live node refers to (-1 when the buffer is empty)."""
    m = -1
    for i in range(high):
        if n_ref[i] >= 0 and n_stage[i] != JOIN and (m < 0 or n_row[i] < m):
            m = n_row[i]
    return m


@njit(cache=True, nogil=True, _nrt=False)
def open_call(meta):
    """Open a call that may be undone (see the module docstring): nodes live now are kept."""
    if meta[META_CALL] == 0 and meta[META_QCOUNT] == 0:
        meta[META_CALL] = meta[META_HIGH]
        meta[META_QHEAD] = -1


@njit(cache=True, nogil=True, _nrt=False)
def close_call(n_parent, n_ref, meta):
    """The call succeeded: its quarantined slots are free, the quarantine put in front of the
    second free list as it is (constant time). (``n_parent``: the signature of the undo calls.)"""
    if meta[META_QHEAD] >= 0:
        n_ref[meta[META_QTAIL]] = -2 - meta[META_FREED]
        meta[META_FREED] = meta[META_QHEAD]
    meta[META_NFREE] += meta[META_QCOUNT]
    meta[META_QHEAD] = -1
    meta[META_QTAIL] = -1
    meta[META_QCOUNT] = 0
    meta[META_CALL] = 0


@njit(cache=True, nogil=True)
def undo_call(n_row, n_stage, n_parent, n_ref, meta, roots):
    """The call failed: back to the nodes live when it opened, which ``roots`` (the runs' and
    held matches' nodes from before the call, -1 ignored) reach. Their ``row``, ``stage`` and
    ``parent`` are as they were (see ``open_call``); ``ref`` is recounted, the high water
    restored, and every other slot below it is free again (the free list rebuilt, lowest slot
    first: which free slot later nodes take may differ, nothing else). Time: the high water."""
    high = meta[META_CALL]
    for i in range(high):
        n_ref[i] = -1  # unreached, for now
    stack = np.empty(16, np.int64)  # JOINs' second sides still to walk
    sp = 0
    for r in roots:
        x = r
        while True:
            while x >= 0 and n_ref[x] == -1:
                n_ref[x] = 0
                if n_stage[x] == JOIN:
                    if sp == stack.shape[0]:
                        bigger = np.empty(2 * sp, np.int64)
                        bigger[:sp] = stack
                        stack = bigger
                    stack[sp] = n_row[x]
                    sp += 1
                x = n_parent[x]
            if sp == 0:
                break
            sp -= 1
            x = stack[sp]
    for r in roots:
        if r >= 0:
            n_ref[r] += 1
    for i in range(high):
        if n_ref[i] >= 0:
            if n_parent[i] >= 0:
                n_ref[n_parent[i]] += 1
            if n_stage[i] == JOIN:
                n_ref[n_row[i]] += 1
    head = -1
    nfree = 0
    for i in range(high - 1, -1, -1):
        if n_ref[i] < 0:
            n_parent[i] = head
            head = i
            nfree += 1
    meta[META_HIGH] = high
    meta[META_FREE] = head
    meta[META_NFREE] = nfree
    meta[META_FREED] = -1
    meta[META_QHEAD] = -1
    meta[META_QTAIL] = -1
    meta[META_QCOUNT] = 0
    meta[META_CALL] = 0
