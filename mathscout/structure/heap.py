"""The bounded min-heap the structure kernels keep their top k in (numba).

A heap entry is a score and a key (a formula or document ordinal); of equal scores the higher key sits lower, so
the top k is the k best by (score, then lowest ordinal) whatever order the ties came in. A sharded index merges
its shards' lists by the same order (retrievers/shards/retriever.py). What else an entry carries stays in the
caller's arrays, at the row `h_row` names.
"""

from __future__ import annotations

import numba


@numba.njit(cache=True)
def below(score_a, key_a, score_b, key_b):
    """Heap order: the lower score, and of equal scores the higher key (the later ordinal loses the tie)."""
    return score_a < score_b or (score_a == score_b and key_a > key_b)


@numba.njit(cache=True)
def push(h_score, h_key, h_row, size, score, key):
    """Insert (score, key) into the heap of capacity len(h_score), replacing the minimum when full. Returns the new
    size and the row of the caller's arrays the new entry owns: the next free one, or the row of the minimum it
    replaced."""
    cap = h_score.shape[0]
    if size < cap:
        row = size
        i = size
        size += 1
        while i > 0:
            parent = (i - 1) // 2
            if not below(score, key, h_score[parent], h_key[parent]):
                break
            h_score[i], h_key[i], h_row[i] = h_score[parent], h_key[parent], h_row[parent]
            i = parent
        h_score[i], h_key[i], h_row[i] = score, key, row
        return size, row
    row = h_row[0]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and below(h_score[child + 1], h_key[child + 1], h_score[child], h_key[child]):
            child += 1
        if not below(h_score[child], h_key[child], score, key):
            break
        h_score[i], h_key[i], h_row[i] = h_score[child], h_key[child], h_row[child]
        i = child
    h_score[i], h_key[i], h_row[i] = score, key, row
    return size, row
