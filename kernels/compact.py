"""Compaction of the shared buffer to what a set of runs and held matches still reach: the
live part of a state, renumbered densely (snapshots, per-key export)."""
import numpy as np
from numba import njit

from .buffer import JOIN


@njit(cache=True, nogil=True)
def compact_buffer(n_row, n_stage, n_parent, high, roots):
    """The nodes reachable from ``roots`` (node ids, -1 ignored) through parents and JOIN
    sides, in their old order: ``(row, stage, parent, ref, new_roots)``. ``ref`` is recounted
    (one per root pointing at a node, one per node pointing at it)."""
    keep = np.zeros(high, np.uint8)
    stack = np.empty(high + roots.shape[0] + 1, np.int64)
    sp = 0
    for r in roots:
        if r >= 0 and keep[r] == 0:
            keep[r] = 1
            stack[sp] = r
            sp += 1
    while sp > 0:
        sp -= 1
        x = stack[sp]
        p = n_parent[x]
        if p >= 0 and keep[p] == 0:
            keep[p] = 1
            stack[sp] = p
            sp += 1
        if n_stage[x] == JOIN:
            b = n_row[x]
            if keep[b] == 0:
                keep[b] = 1
                stack[sp] = b
                sp += 1
    new_id = np.full(high, -1, np.int64)
    n = 0
    for i in range(high):
        if keep[i]:
            new_id[i] = n
            n += 1
    row = np.empty(n, np.int64)
    stage = np.empty(n, np.int32)
    parent = np.full(n, -1, np.int64)
    ref = np.zeros(n, np.int32)
    for i in range(high):
        if keep[i]:
            y = new_id[i]
            stage[y] = n_stage[i]
            row[y] = n_row[i]
            if n_parent[i] >= 0:
                parent[y] = new_id[n_parent[i]]
                ref[parent[y]] += 1
            if n_stage[i] == JOIN:
                row[y] = new_id[n_row[i]]
                ref[row[y]] += 1
    new_roots = np.full(roots.shape[0], -1, np.int64)
    for i in range(roots.shape[0]):
        if roots[i] >= 0:
            new_roots[i] = new_id[roots[i]]
            ref[new_roots[i]] += 1
    return row, stage, parent, ref, new_roots


# what check_buffer finds wrong
BUF_OK, BUF_PARENT, BUF_STAGE, BUF_JOIN, BUF_ROW, BUF_ROOT, BUF_REF, BUF_CYCLE = range(8)


@njit(cache=True, nogil=True)
def check_buffer(row, stage, parent, ref, roots, n_stages, n_rows):
    """What is wrong with a compacted buffer (a snapshot's, before any kernel indexes it):
    ``(code, index)``, ``BUF_OK`` when nothing is. Every parent, JOIN side and root (-1: none) is
    a node; every stage is the pattern's (or JOIN); every event row is in ``[0, n_rows)``; every
    ``ref`` is the number of nodes, runs and held matches pointing at the node; no node is its own
    ancestor (Kahn's algorithm over the parent and JOIN-side edges). ``index``: the first bad node
    (for ``BUF_ROOT``, the root's position). Time: linear."""
    n = row.shape[0]
    kids = np.zeros(n, np.int64)
    for i in range(n):
        p = parent[i]
        if p < -1 or p >= n:
            return BUF_PARENT, i
        if p >= 0:
            kids[p] += 1
        if stage[i] == JOIN:
            b = row[i]
            if b < 0 or b >= n:
                return BUF_JOIN, i
            kids[b] += 1
        elif stage[i] < 0 or stage[i] >= n_stages:
            return BUF_STAGE, i
        elif row[i] < 0 or row[i] >= n_rows:
            return BUF_ROW, i
    held = np.zeros(n, np.int64)
    for q in range(roots.shape[0]):
        r = roots[q]
        if r < -1 or r >= n:
            return BUF_ROOT, q
        if r >= 0:
            held[r] += 1
    for i in range(n):
        if ref[i] != kids[i] + held[i]:
            return BUF_REF, i
    # no cycle: remove nodes no other node points at, one by one; what stays is on a cycle
    stack = np.empty(n, np.int64)
    sp = 0
    for i in range(n):
        if kids[i] == 0:
            stack[sp] = i
            sp += 1
    done = 0
    while sp > 0:
        sp -= 1
        x = stack[sp]
        done += 1
        p = parent[x]
        if p >= 0:
            kids[p] -= 1
            if kids[p] == 0:
                stack[sp] = p
                sp += 1
        if stage[x] == JOIN:
            b = row[x]
            kids[b] -= 1
            if kids[b] == 0:
                stack[sp] = b
                sp += 1
    if done < n:
        for i in range(n):
            if kids[i] > 0:
                return BUF_CYCLE, i
    return BUF_OK, -1
