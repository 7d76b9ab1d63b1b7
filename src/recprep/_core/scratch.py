"""Scratch buffers: memory for a chunk's passing bytes, reused once nothing holds it.

Reading a chunk makes two buffers that live only until it is decoded: its stored bytes
(read from the file) and its records (decompressed). Fresh ones each time cost page
faults: glibc gives buffers of more than its mmap threshold (128 KiB at first, moved by
what the process freed before) pages of their own and hands them back when they are
freed, so every chunk faults its pages in again — 3,400 faults, a third of a pass of
batches over 200,000 small records, on the machine of ``benchmarks/``, or none at all,
depending on what the process allocated before. :func:`scratch` gives the memory of a
buffer this thread used before instead, once nothing refers to it any more.

What it hands out is a ``memoryview`` of a ``bytearray`` it keeps. A buffer is taken
again only when it has no export: no memoryview of it (or a slice of one), no numpy
array or Arrow buffer over it is alive anywhere — a ``bytearray`` with exports can't
change size, which :func:`_free` asks. So a buffer is never written while anything can
still read it: a decoded value that kept a view of a chunk's records keeps its memory
out of reuse, and the next chunk gets a fresh one. The first use in a process also
settles glibc's heap (:func:`_settle_heap`), which the chunks' fresh buffers used to do.

>>> a = scratch(100_000)
>>> a[:3] = b"abc"
>>> b = scratch(100_000)          # ``a`` is alive: another buffer
>>> b.obj is a.obj
False
>>> kept = a.obj
>>> del a
>>> scratch(90_000).obj is kept   # nothing holds the first one now: it is reused
True
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["HEAP_BLOCK", "HELD_BYTES", "MAX_BUFFERS", "STEP", "scratch"]

HELD_BYTES = 32 << 20
"""What one thread keeps for reuse at most (buffers in use and free together): the
chunks of a pass's round-robin round are alive together, one buffer each."""

MAX_BUFFERS = 32
"""How many buffers one thread keeps at most."""

STEP = 64 << 10
"""Buffers are made in multiples of this (chunks' sizes vary by a few bytes: a buffer
then fits the next chunk too); smaller ones are made fresh each time, never kept (the
heap serves them without page faults of their own, and a small buffer a decoded value
keeps alive should cost no more than its size)."""

HEAP_BLOCK = 4 << 20
"""The block :func:`_settle_heap` hands back to the C library once a process."""

_local = threading.local()
_heap_settled: list[bool] = []  # [True] once the heap is settled in this process


def _settle_heap() -> None:
    """Allocate a :data:`HEAP_BLOCK` and free it, once a process, untouched.

    glibc serves blocks of more than its mmap threshold (128 KiB at first) with pages of
    their own, unmapped when freed, and gives its heap's top back to the system past
    twice that. The first time a process frees such a block bigger than the threshold,
    it raises both to match (4 MiB and 8 MiB here, for good: they only grow) — what any
    process does once it frees a big numpy temporary. Reading used to do it by chance,
    its chunks' bytes freed after each chunk; with those in scratch buffers, a process
    that did nothing else kept 128 KiB and faulted its row arrays and batches in again
    and again: ``read()`` of the MNIST-like set 16,000 faults a pass and ~40% slower,
    where after this it faults none. Elsewhere than glibc it is a free of 4 MiB."""
    _heap_settled.append(True)
    block = np.empty(HEAP_BLOCK, np.uint8)  # (its pages never touched: nothing faulted)
    del block


def scratch(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes: the smallest of this thread's buffers that
    is big enough and that nothing refers to any more, else a fresh one — kept for
    reuse while this thread keeps fewer than :data:`MAX_BUFFERS` and at most
    :data:`HELD_BYTES` (letting a free one go to make room), else numpy's, unfilled:
    one that won't be used again isn't worth zeroing."""
    if size < STEP:
        return memoryview(bytearray(size))
    if not _heap_settled:
        _settle_heap()
    held: list[bytearray] | None = getattr(_local, "held", None)
    if held is None:
        held = _local.held = []
    want = -(-size // STEP) * STEP
    best = None
    for buf in held:
        have = len(buf)
        if have >= want and (best is None or have < len(best)) and _free(buf):
            best = buf
            if have == want:
                break
    if best is None:
        if not _room(held, want):
            return memoryview(np.empty(size, np.uint8).data)
        best = bytearray(want)
        held.append(best)
    return memoryview(best)[:size]


def _room(held: list[bytearray], size: int) -> bool:
    """Whether a buffer of ``size`` bytes can be kept among ``held``, once a free one is
    let go if that makes room."""
    total = sum(map(len, held))
    if len(held) < MAX_BUFFERS and total + size <= HELD_BYTES:
        return True
    for k, buf in enumerate(held):
        if total - len(buf) + size <= HELD_BYTES and _free(buf):
            del held[k]
            return True
    return False


def _free(buf: bytearray) -> bool:
    """Whether nothing refers to ``buf``'s memory: no view, array or buffer over it (a
    ``bytearray`` with exports refuses to change size; one byte off and back on moves
    nothing: it shrinks and grows within what was allocated)."""
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True
