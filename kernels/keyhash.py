"""Key values to dense codes through a hash table kept across batches: one pass over a key
column's Arrow buffers, no dictionary made per batch.

The table (``colcep.engine.keyindex`` owns it) is open addressing with linear probing over
``slots`` (a power of two; -1: empty), each holding a key's code; per code its first 8 bytes as
one word (``k_word``; an integer key: its value), its length in bytes (``k_len``; -1: an integer
key) and, for a string longer than 8 bytes, the rest in ``arena[k_off[c]:k_off[c + 1]]``. A key
of up to 8 bytes (most tickers) is found by one word compare. Codes are numbered in first-seen
order, as Arrow's dictionary encoding numbers a column's values.

``encode`` codes rows ``[i0, n)`` and stops early (returning the row to resume at) when the table
needs room: ``room`` below; the caller grows it (``rehash``) and calls again. With ``insert``
off they only look keys up (-1 for a key not in the table), so that slices of a batch can be
looked up on several threads at once and the misses coded after, in row order.
"""
import numpy as np
from numba import njit

_MIX = np.uint64(0x9E3779B97F4A7C15)
_W8 = np.uint64(8)


@njit(cache=True, nogil=True, inline="always")
def _word(data, a, b):
    """The bytes ``data[a:b]`` (at most 8) as one word, the first in the low byte."""
    w = np.uint64(0)
    sh = np.uint64(0)
    for i in range(a, b):
        w |= np.uint64(data[i]) << sh
        sh += _W8
    return w


@njit(cache=True, nogil=True, inline="always")
def _slot(h, mask):
    return ((h * _MIX) >> np.uint64(32)) & mask


@njit(cache=True, nogil=True, inline="always")
def _bytes_hash(data, a, b):
    """The hash of the bytes ``data[a:b]``: their 8-byte words mixed in turn, with the length."""
    h = np.uint64(b - a)
    while a < b:
        e = min(a + 8, b)
        h = (h ^ _word(data, a, e)) * _MIX + np.uint64(0x632BE59BD9B4E019)
        a = e
    return h


@njit(cache=True, nogil=True, _nrt=False)
def room(slots, k_word, arena, n_codes, arena_used, more_bytes):
    """Whether the table takes one more key of ``more_bytes`` bytes beyond its first 8 (at most
    half its slots in use)."""
    return (2 * (n_codes + 1) <= slots.shape[0] and n_codes + 1 <= k_word.shape[0]
            and arena_used + more_bytes <= arena.shape[0])


@njit(cache=True, nogil=True, inline="always")
def _code(slots, k_word, k_len, k_off, arena, n_codes, h, w, length, data, tail_at, tail, insert):
    """The code of the key whose hash is ``h``, first word ``w``, length ``length`` (-1: an
    integer) and bytes beyond the first 8 ``data[tail_at:tail_at + tail]``, and the number of
    codes after: a new key gets code ``n_codes`` (``insert``), else -1; -2 when the table has no
    room for it (``room``). (Inlined by Numba into a function compiled with reference counting,
    it would count each array's references at every row: ``encode`` is compiled without.)"""
    mask = np.uint64(slots.shape[0] - 1)
    s = _slot(h, mask)
    while True:
        c = slots[s]
        if c < 0:
            if not insert:
                return -1, n_codes
            if not room(slots, k_word, arena, n_codes, k_off[n_codes], tail):
                return -2, n_codes
            slots[s] = n_codes
            k_word[n_codes] = w
            k_len[n_codes] = length
            at = k_off[n_codes]
            for j in range(tail):
                arena[at + j] = data[tail_at + j]
            k_off[n_codes + 1] = at + tail
            return n_codes, n_codes + 1
        if k_word[c] == w and k_len[c] == length:
            same = True
            at = k_off[c]
            for j in range(tail):
                if arena[at + j] != data[tail_at + j]:
                    same = False
                    break
            if same:
                return c, n_codes
        s = (s + np.uint64(1)) & mask


@njit(cache=True, nogil=True, _nrt=False)
def encode(offs32, offs64, data, ints, i0, slots, k_word, k_len, k_off, arena, n_codes, insert, out, first):
    """Code the keys of rows ``i >= i0`` into ``out[i]``: strings ``data[offs[i]:offs[i + 1]]``
    (``offs``: Arrow's offsets, ``offs64`` when it has rows, else ``offs32``), or integers
    ``ints`` where both offsets are empty (one signature for every kind). A key not in the table
    gets code ``n_codes`` (then the next ones), its row noted in ``first[code - n_codes at the
    start]`` (``insert``; else its code is -1). Returns (the row to resume at, -1 when all are
    coded; the number of codes)."""
    c0 = n_codes
    wide = offs64.shape[0] > 0
    strings = wide or offs32.shape[0] > 0
    rows = (offs64.shape[0] if wide else offs32.shape[0]) - 1 if strings else ints.shape[0]
    for i in range(i0, rows):
        if strings:
            a = offs64[i] if wide else np.int64(offs32[i])
            b = offs64[i + 1] if wide else np.int64(offs32[i + 1])
            length = b - a
            head = min(b, a + 8)
            w = _word(data, a, head)
            h = (w ^ np.uint64(length)) if length <= 8 else _bytes_hash(data, a, b)
            tail = b - head
        else:
            w = np.uint64(ints[i])
            h = w
            length, head, tail = -1, 0, 0
        c, n = _code(slots, k_word, k_len, k_off, arena, n_codes, h, w, length, data, head, tail, insert)
        if c == -2:
            return i, n_codes
        if n > n_codes:
            first[c - c0] = i
            n_codes = n
        out[i] = c
    return -1, n_codes


@njit(cache=True, nogil=True)
def rehash(slots, k_word, k_len, k_off, arena, n_codes):
    """Put codes ``[0, n_codes)`` into the empty ``slots`` (all -1), from their stored keys."""
    mask = np.uint64(slots.shape[0] - 1)
    for c in range(n_codes):
        length = k_len[c]
        if length < 0:
            h = k_word[c]
        elif length <= 8:
            h = k_word[c] ^ np.uint64(length)
        else:  # the key's bytes again: its first word, then its tail
            buf = np.empty(length, np.uint8)
            w = k_word[c]
            for j in range(8):
                buf[j] = np.uint8((w >> np.uint64(8 * j)) & np.uint64(0xFF))
            for j in range(length - 8):
                buf[8 + j] = arena[k_off[c] + j]
            h = _bytes_hash(buf, 0, length)
        s = _slot(h, mask)
        while slots[s] >= 0:
            s = (s + np.uint64(1)) & mask
        slots[s] = c
