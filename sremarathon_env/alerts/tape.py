"""Per-series running summaries of the store's columns, extended incrementally, for range functions.

The alert engine evaluates the rule pack a few ticks at a time over a store that only grows (rows
are appended, columns are written once, in time order). Range functions over windows of minutes to
a day would otherwise rescan every window on every call. A ``Tape`` keeps, for each series it was
asked about ("slot"), arrays over all columns seen so far, each extended by the new columns only:

* the values, the running count of present samples, the index of the last present sample at or
  before each column, the column of the j-th present sample;
* counter resets and value changes (running counts, the last reset's column).

With them one window reduction is a handful of gathers per (series, time), whatever the window's
length, and ``window_kernel`` evaluates rate / increase / delta / changes / resets /
count_over_time / last_over_time / present_over_time for many series with a window (range, offset)
per series in one pass, with exactly the arithmetic of ``rangefuncs`` (bit-identical results).

Contract with the store (as with Prometheus's TSDB): samples at ticks below ``n_ticks`` are final
once read. When the tape extends its slots, it reads the last column it has seen again and starts
from scratch if that column changed (a cheap guard, not a proof).

>>> import numpy as np
>>> from sremarathon_env.telemetry.store import MetricStore
>>> store = MetricStore(step_s=15.0)
>>> fam = store.family("c_total", ("i",))
>>> rows = fam.rows([("a",)])
>>> for k in range(41):
...     store.write(fam, rows, k, np.array([2.0 * k * 15]))
>>> tape = Tape(store)
>>> slots = tape.slots([(fam, 0)])
>>> tape.sync()
>>> spec = KernelSpec(slots, np.array([300_000]), np.array([0]), np.array([CODES["rate"]]))
>>> v, p = window_kernel(tape, spec, np.array([600_000]))
>>> float(v[0, 0]), bool(p[0, 0])
(2.0, True)
"""

from __future__ import annotations

import importlib
import threading
import time

import numpy as np

from .compiled import kernels, note_numpy

#: range functions the kernel evaluates, by code
CODES = {"rate": 0, "increase": 1, "delta": 2, "changes": 3, "resets": 4, "count_over_time": 5,
         "last_over_time": 6, "present_over_time": 7, "max_over_time": 8, "min_over_time": 9}
_EXTRAPOLATED = (0, 1, 2)


def _madvise_switch():
    """numpy's switch for asking the kernel for transparent huge pages on large arrays (``numpy._core`` from numpy
    2, ``numpy.core`` before), or None where there is none."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "_set_madvise_hugepage", None)
        if fn is not None:
            return fn
    return None


_SET_MADVISE_HUGEPAGE = _madvise_switch()


def _empty_small_pages(shape: tuple, dtype) -> np.ndarray:
    """``np.empty`` without numpy's huge-page advice (``madvise(MADV_HUGEPAGE)`` on arrays of 4 MiB and more).

    On huge pages a first touch makes the kernel find (and, where memory is fragmented, compact for) a free 2 MiB
    page: with the earlier row-major layout, whose first sync touched every page of the rows in use at once, a TT
    first sync took 9 ms or 60-100 ms of system time at random (6 episodes: 90.5, 3.4, 90.7, 8.3, 100.2, 8.2 ms).
    Ordinary pages cost a steady ~1 us each. Values are the same either way (the arrays are uninitialised, see
    ``Tape._alloc``)."""
    if _SET_MADVISE_HUGEPAGE is None:
        return np.empty(shape, dtype=dtype)
    old = _SET_MADVISE_HUGEPAGE(False)
    try:
        return np.empty(shape, dtype=dtype)
    finally:
        _SET_MADVISE_HUGEPAGE(old)



# -- buffers of released tapes ---------------------------------------------------------------------------------
#: the cell buffers of released tapes (`Tape.release`), for the next tapes' cells: their pages are in memory already
#: (a fresh buffer faults each page in at its first write, ~1.5 us a page on this VM: ~25 pages per 8-column sync of
#: an Online Boutique tape). The cells are uninitialised by contract (every cell is written before it is read, see
#: ``Tape._alloc``), so what an earlier tape left in a buffer is never read. A buffer serves a tape needing between
#: half its size and its size; at most `POOL_MAX` buffers (one tape's cells: a marathon's engine releases its tape
#: before the next one allocates) are kept, none under `POOL_MIN_BYTES`.
_POOL: list[np.ndarray] = []
_POOL_LOCK = threading.Lock()
POOL_MAX = 1
POOL_MIN_BYTES = 1 << 20
#: slot capacities are rounded up to a multiple of this, so that the tapes of one app's episodes (a few slots more or
#: less) get buffers of the same shapes, whose used cells lie on the pages the previous tape used
SLOT_ROUND = 256
#: the integer summaries of a cell, in their order after the value in the cell's record (see ``Tape._alloc``)
FIELDS = ("CS", "PV", "POS", "RC", "CC", "LR")


def _buffer(n_items: int) -> np.ndarray:
    """A 1-D float64 buffer of at least ``n_items`` items: the smallest pooled one that fits, else a fresh one."""
    if n_items * 8 >= POOL_MIN_BYTES:
        with _POOL_LOCK:
            best = None
            for i, b in enumerate(_POOL):
                if n_items <= b.size <= 2 * n_items and (best is None or b.size < _POOL[best].size):
                    best = i
            if best is not None:
                return _POOL.pop(best)
    return _empty_small_pages((n_items,), np.float64)


def _give_back(buffers: list) -> None:
    with _POOL_LOCK:
        for b in buffers:
            if b.nbytes >= POOL_MIN_BYTES and len(_POOL) < POOL_MAX and not any(b is x for x in _POOL):
                _POOL.append(b)


#: up to this many columns and from this many slots, running sums and maxima over the time axis go row by row
#: (numpy's ``accumulate`` along an axis steps element by element, ~3 ns each; a row at a time is one vector operation
#: per column, ~0.5 us: it pays from ~250 slots)
_ROWWISE_MAX = 32
_ROWWISE_MIN_SLOTS = 256


def _running(ufunc, a: np.ndarray) -> np.ndarray:
    """``ufunc.accumulate(a, axis=0)`` of an int64 (columns, slots) array, in place (``a`` is returned).

    >>> a = np.array([[1, 0], [0, 2], [3, 1]])
    >>> _running(np.add, a.copy()).tolist() == np.add.accumulate(a, axis=0).tolist()
    True
    >>> a = np.arange(3 * 300).reshape(3, 300) % 7    # row by row
    >>> _running(np.maximum, a.copy()).tolist() == np.maximum.accumulate(a, axis=0).tolist()
    True
    """
    if len(a) > _ROWWISE_MAX or a.shape[1] < _ROWWISE_MIN_SLOTS:
        return ufunc.accumulate(a, axis=0, out=a)
    for k in range(1, len(a)):
        ufunc(a[k - 1], a[k], out=a[k])
    return a


class Tape:
    """Running per-series summaries over the columns of a ``MetricStore``."""

    def __init__(self, store, capacity: int | None = None):
        """``capacity``: columns to allocate; by default the store's own (a marathon's ticks), so the tape only
        grows in time when the store does (each growth copies every summary array)."""
        if capacity is None:
            capacity = int(getattr(store, "capacity", 0) or 512) + 1
        self.store = store
        self.N = 0  # columns processed
        self._fams: list = []  # families, by family slot
        self._fam_no: dict[int, int] = {}  # family identity -> its slot (``_fams`` holds each family: ids stay unique)
        self._fam_of: list[int] = []  # per slot: family index
        self._row_of: list[int] = []  # per slot: row in its family
        self._row_slot: list[np.ndarray] = []  # per family: slot of each row (-1: none yet)
        self._groups: list[tuple[object, np.ndarray, np.ndarray]] | None = None   # (the numpy extension's)
        self._slot_arrays = _SlotArrays()   # ``_fam_of`` / ``_row_of`` as arrays, for the compiled extension
        self._pending: list[int] = []  # slots added since the last sync
        self.resets = 0
        self._alloc(16, capacity)

    # ---------------------------------------------------------------- slots
    def slots(self, pairs) -> np.ndarray:
        """Slot indices of ``(family, row)`` pairs (new ones are filled at the next ``sync``)."""
        out = np.empty(len(pairs), dtype=np.intp)
        for i, (fam, row) in enumerate(pairs):
            row = int(row)
            fi = self._fam_index(fam)
            m = self._row_slot[fi]
            if row >= len(m):
                m = self._row_slot[fi] = np.concatenate([m, np.full(max(row + 1, 2 * len(m)) - len(m), -1, dtype=np.intp)])
            s = int(m[row])
            if s < 0:
                s = len(self._row_of)
                m[row] = s
                self._fam_of.append(fi)
                self._row_of.append(row)
                self._pending.append(s)
            out[i] = s
        return out

    def _fam_index(self, fam) -> int:
        """The family's index (a new one for a family not seen yet)."""
        fi = self._fam_no.get(id(fam))
        if fi is None:
            fi = self._fam_no[id(fam)] = len(self._fams)
            self._fams.append(fam)
            self._row_slot.append(np.full(0, -1, dtype=np.intp))
        return fi

    def slots_of(self, flat) -> np.ndarray:
        """Slot indices of the rows of ``[(family, rows array)]``, in order (as ``slots`` on the pairs)."""
        outs = []
        for fam, rows in flat:
            rows = np.asarray(rows, dtype=np.intp)
            fi = self._fam_index(fam)
            m = self._row_slot[fi]
            need = int(rows.max()) + 1 if len(rows) else 0
            if need > len(m):
                m = np.concatenate([m, np.full(max(need, 2 * len(m)) - len(m), -1, dtype=np.intp)])
                self._row_slot[fi] = m
            got = m[rows]
            new = np.flatnonzero(got < 0)
            if len(new):
                fresh = rows[new]
                fl = fresh.tolist()
                if len(set(fl)) != len(fl):
                    # a selector lists each row once; keep the first occurrence anyway
                    fresh, first = np.unique(fresh, return_index=True)
                    fresh = fresh[np.argsort(first, kind="stable")]
                    fl = fresh.tolist()
                base = len(self._row_of)
                ids = np.arange(base, base + len(fresh), dtype=np.intp)
                m[fresh] = ids
                self._fam_of.extend([fi] * len(fl))
                self._row_of.extend(fl)
                self._pending.extend(ids.tolist())
                got = m[rows]
            outs.append(got)
        if len(outs) == 1:
            return outs[0]   # (a new array: the gather's)
        return np.concatenate(outs) if outs else np.zeros(0, dtype=np.intp)

    #: the summaries (the value, then the integer FIELDS of the cell records, see ``_alloc``) with their columns beyond
    #: the capacity (``CS`` counts the samples before a column: one more)
    _SUMMARIES = (("V", 0),) + tuple((name, 1 if name == "CS" else 0) for name in FIELDS)

    @staticmethod
    def _int_dtype(n_slots: int, cap: int):
        """int32 for the integer summaries (half the memory traffic of int64) where every flat offset
        ``column * n_slots + slot`` of them fits in it (then so does every product of a value and ``n_slots``
        the window kernel forms: values are columns or counts, at most ``cap``); int64 beyond."""
        return np.int32 if (cap + 1) * n_slots < 2 ** 31 else np.int64

    def _alloc(self, n_slots: int, cap: int) -> None:
        """Uninitialised cells: every cell is written before it is read. A slot's columns [0, N) are written
        when it is synced (new slots from column 0, ``CS[slot, 0] = 0`` included), later columns as the tape
        extends; a window reads columns below N only (and ``POS`` at ranks below a slot's count: a cell past it
        is only read where the window is empty, and the value is masked). So rows and columns never used are
        never touched (no page of them is faulted in) and growing copies only what was written."""
        # V: values; CS: present samples in columns [0, k); PV: last present column <= k; POS: column of the
        # j-th present sample; RC: counter resets in columns [0, k]; CC: value changes in columns [0, k]; LR: last
        # reset column <= k (0 if none). The value before a reset at column c is V[PV[c - 1]].
        # One record per cell (column, slot): the value (float64), then the six integers (FIELDS; int32 records are
        # 32 bytes, int64 ones 64 with a spare field), in a (columns + 1, slots) array of records, column-major: the
        # columns written so far are all the memory touched (row-major, a first sync touched every page of every row
        # in use at once), and a column's used slots are one stretch of memory (as separate arrays, each array's
        # stretch of each column touched a page of its own: 2.3x the page faults of a fresh tape, more TLB entries).
        # The summaries are (slots, columns) views of the records' fields (`V`, `CS`, ...); ``_flat`` has them as flat
        # views (cell ``column * cap_s + slot``: numpy's fancy indexing, never ``take``, which copies a strided array).
        # The buffer is fresh, or one a released tape gave back (see `release`).
        # A pooled buffer (a released tape's) is laid out as that tape had it where it can be: with its slot
        # capacity, when its size is a whole number of (columns + 1) * record columns of slots (``_buffer`` gives
        # one of at most twice the size asked for, so at most twice the slots). The cells this tape uses then lie
        # on the pages the earlier tape used, which are in memory already; with another slot capacity (an episode
        # with a few more or fewer series, rounded to another multiple of ``SLOT_ROUND``) a column's used slots
        # start on other pages, and a Train Ticket marathon faulted ~4000 of them in again.
        it = np.dtype(self._int_dtype(n_slots, cap))
        w = 4 if it.itemsize == 4 else 8   # float64 words per record
        n = (cap + 1) * n_slots * w
        buf = _buffer(n)
        if buf.size != n and buf.size % ((cap + 1) * w) == 0:
            s2 = buf.size // ((cap + 1) * w)
            if np.dtype(self._int_dtype(s2, cap)) == it:
                n_slots, n = s2, buf.size
        self.cap_s, self.cap_t = n_slots, cap
        self._bufs = [buf]
        cells = buf[:n].reshape(cap + 1, n_slots, w)
        ints = cells.view(it)               # (columns + 1, slots, 8): the value takes the first 8 bytes
        f0 = 8 // it.itemsize
        self._cells, self._ints, self._f0 = cells, ints, f0
        flat = buf[:n]
        self._flat = {"V": flat[0::w]}
        iflat = flat.view(it)
        self.V = cells[:cap, :, 0].T
        for k, (name, extra) in enumerate(self._SUMMARIES[1:]):
            setattr(self, name, ints[: cap + extra, :, f0 + k].T)
            self._flat[name] = iflat[f0 + k :: 8]

    def release(self) -> None:
        """Give the cell buffer to the next tapes (the owner is done with this tape: a marathon that ended). The
        tape stays usable: its next sync allocates cells again and starts from column 0, which gives the same
        summaries (`sync` after a detected rewrite does the same)."""
        bufs = self._bufs
        self._alloc(1, 1)   # placeholders (below the pool's size), nothing synced
        self.N = 0
        self._groups = None
        self._pending = []
        _give_back(bufs)

    def _grow(self, n_slots: int, cap: int) -> None:
        """Larger (uninitialised, see ``_alloc``) cells holding what was written of the old ones."""
        s, t = self.cap_s, self.cap_t
        # slots: doubling, and as much headroom over a jump (the first selectors register most series at once;
        # pods that come later add rows): rows never used cost no memory traffic, a growth copies every array.
        # Before any column is processed nothing is copied: room for four times the slots then (the pods a
        # faulted marathon replaces about double them, random RL actions about triple them; a later growth
        # copies every summary so far and holds both copies)
        S2 = max((4 if self.N == 0 else 2) * n_slots, 2 * s) if n_slots > s else s
        if S2 > s:
            S2 = -(-S2 // SLOT_ROUND) * SLOT_ROUND
        T2 = max(cap, 2 * t if cap > t else t)
        S, N = len(self._row_of), self.N
        old = {name: getattr(self, name) for name, _ in self._SUMMARIES}
        self._alloc(S2, T2)
        keep = min(S, s)  # slots synced so far (a slot registered since has no column yet)
        for name, extra in self._SUMMARIES:
            getattr(self, name)[:keep, : N + extra] = old[name][:keep, : N + extra]

    def _fam_groups(self, slots):
        """[(family, positions in ``slots``, rows)] of the slots ``slots`` (an index array, or a slice of the slots
        in order: only that part of the per-slot lists is read). Positions ascend within a family."""
        if isinstance(slots, slice):
            fam_of = np.asarray(self._fam_of[slots], dtype=np.intp)
            row_of = np.asarray(self._row_of[slots], dtype=np.intp)
        else:
            fam_of = np.asarray(self._fam_of, dtype=np.intp)[slots]
            row_of = np.asarray(self._row_of, dtype=np.intp)[slots]
        out = []
        for fi in np.unique(fam_of).tolist():
            m = np.flatnonzero(fam_of == fi)
            out.append((self._fams[fi], m, row_of[m]))
        return out

    @staticmethod
    def _merge_groups(groups: list, new: list) -> list:
        """``groups`` (per family: slots, rows) with the slots and rows of ``new`` joining their family's; slots
        ascend within a family (pending slots may come in any order; `_extend_numpy` takes a run of them as a slice)."""
        out = list(groups)
        at = {id(fam): i for i, (fam, _, _) in enumerate(out)}
        for fam, m, rows in new:
            i = at.get(id(fam))
            if i is not None:
                _, m0, r0 = out[i]
                m, rows = np.concatenate([m0, m]), np.concatenate([r0, rows])
            if len(m) > 1 and not (m[1:] > m[:-1]).all():
                order = np.argsort(m, kind="stable")
                m, rows = m[order], rows[order]
            if i is None:
                at[id(fam)] = len(out)
                out.append((fam, m, rows))
            else:
                out[i] = (fam, m, rows)
        return out

    # ---------------------------------------------------------------- columns
    def sync(self, upto: int | None = None) -> None:
        """Extend every slot to ``upto`` columns (default and at most the store's ``n_ticks``; new slots
        from column 0). Columns already processed stay (``upto`` below ``N`` changes nothing)."""
        n = self.store.n_ticks if upto is None else max(min(int(upto), self.store.n_ticks), self.N)
        S = len(self._row_of)
        if S > self.cap_s or n > self.cap_t:
            self._grow(S, n)
        if self.N == 0:
            self._start(S, n)
            return
        if self._pending:
            sl = np.asarray(self._pending, dtype=np.intp)
            # slots are numbered as they are registered, so the pending ones are a range: read and written through a
            # slice (basic indexing), not through the index array (the same cells)
            lo = int(sl[0])
            part = slice(lo, lo + len(sl)) if np.array_equal(sl, np.arange(lo, lo + len(sl))) else sl
            if kernels() is not None:
                # (the compiled extension reads each slot's family and row from `_SlotArrays`: no family groups;
                # the numpy extension's are made again if it runs later)
                self._extend(part, sl, None, 0, self.N)
                self._groups = None
            else:
                new = self._fam_groups(part)
                self._extend(part, sl, new, 0, self.N)
                if self._groups is not None:   # the new slots join their families' groups
                    self._groups = self._merge_groups(self._groups, [(fam, sl[m], rows) for fam, m, rows in new])
            self._pending = []
        if n > self.N:
            if not self._extend(slice(0, S), None, None, self.N, n):
                self.resets += 1  # a column already read was rewritten: start again
                self._start(S, n)
                return
            self.N = n

    def _start(self, S: int, n: int) -> None:
        self._pending = []
        self._groups = None
        self._extend(slice(0, S), None, None, 0, n)
        self.N = n

    def _extend(self, sl, idx: np.ndarray | None, groups, c0: int, c1: int) -> bool:
        """Process columns [c0, c1) of the slots ``sl`` (a slice or the index array ``idx``; None with ``sl`` the
        slice of every slot, [0, S)). When c0 > 0 the column c0 - 1 is read again and compared with the tape
        (False: it changed). ``groups``: the family groups of ``sl`` (`_fam_groups`), or None (the numpy path makes
        them; every slot's are kept in ``_groups``).

        Computed as (columns, slots) blocks, the layout of the cells (column-major, see ``_alloc``): the writes
        are column stretches of the summaries' fields and the running sums and maxima run over the short time axis
        with the slots as the long inner loop (integer sums and maxima: the same numbers in any layout). The
        compiled kernel computes the same summaries slot by slot, every family in one call."""
        if idx is None:
            if c1 <= c0 or sl.stop == 0:
                return True
        elif c1 <= c0 or not len(idx):
            return True
        nb = kernels()
        if nb is not None:   # the same summaries, one fused pass over the families' store rows (compiled.py)
            return self._extend_compiled(nb, sl, c0, c1)
        if idx is None:
            idx = np.arange(sl.stop, dtype=np.intp)
            if self._groups is None:
                self._groups = self._fam_groups(sl)
            groups = self._groups
        elif groups is None:
            groups = self._fam_groups(sl)
        t_np = time.process_time()
        try:
            return self._extend_numpy(sl, idx, groups, c0, c1)
        finally:
            note_numpy(time.process_time() - t_np)   # (counts towards loading the compiled kernels)

    def _extend_numpy(self, sl, idx, groups, c0: int, c1: int) -> bool:
        """``_extend`` by numpy: the reference."""
        n_sl = len(idx)
        g0 = c0 - 1 if c0 > 0 else c0
        cap_s = self.cap_s
        # (columns, slots) views of the cells' fields
        V, CS, PV = self.V.T, self.CS.T, self.PV.T
        B = np.empty((n_sl, c1 - g0))
        for fam, m, rows in groups:
            k = len(m)
            if k and m[k - 1] - m[0] == k - 1:   # (ascending, see `_fam_groups`) positions in one run: a slice
                B[m[0] : m[0] + k] = fam._data[rows, g0:c1]
            else:
                B[m] = fam._data[rows, g0:c1]
        B = np.ascontiguousarray(B.T)   # (columns, slots)
        if g0 < c0:
            a, b = B[0], V[g0, sl]
            if not ((a == b) | ((a != a) & (b != b))).all():   # equal, NaN equal to NaN
                return False
            B = B[1:]
        if c0 == 0:
            CS[0, sl] = 0
        p = ~np.isnan(B)
        V[c0:c1, sl] = B
        cs = _running(np.add, p.astype(np.int64))
        cs0 = CS[c0, sl]
        CS[c0 + 1 : c1 + 1, sl] = cs0 + cs
        kidx = np.arange(c0, c1, dtype=np.int64)[:, None]
        carry = PV[c0 - 1, sl] if c0 > 0 else np.full(n_sl, -1, dtype=np.int64)
        pv = np.where(p, kidx, -1)
        np.maximum(pv[0], carry, out=pv[0])
        _running(np.maximum, pv)
        PV[c0:c1, sl] = pv
        pp = np.empty_like(pv)
        pp[0] = carry
        pp[1:] = pv[:-1]
        has_prev = pp >= 0
        prev = self._flat["V"][np.maximum(pp, 0) * cap_s + idx]
        prev = np.where(has_prev, prev, 0.0)
        step = p & has_prev
        reset = step & (B < prev)
        change = step & (B != prev)
        RC, CC, LR = self.RC.T, self.CC.T, self.LR.T
        if c0 > 0:
            rc0, cc0, lr0 = RC[c0 - 1, sl], CC[c0 - 1, sl], LR[c0 - 1, sl]
        else:
            rc0 = cc0 = lr0 = np.zeros(n_sl, dtype=np.int64)
        CC[c0:c1, sl] = cc0 + _running(np.add, change.astype(np.int64))
        if not reset.any():
            # no counter reset in these columns (the usual case): counts and last reset carry over
            RC[c0:c1, sl] = rc0
            LR[c0:c1, sl] = lr0
        else:
            RC[c0:c1, sl] = rc0 + _running(np.add, reset.astype(np.int64))
            lr = np.where(reset, kidx, 0)
            np.maximum(lr[0], lr0, out=lr[0])
            _running(np.maximum, lr)
            LR[c0:c1, sl] = lr
        # the j-th present sample of a slot is at column POS[slot, j]; flat offsets of present cells
        flat = (cs0 - 1 + cs) * cap_s + idx
        if p.all():   # every cell present (the usual case): no selection needed
            self._flat["POS"][flat] = kidx
        else:
            self._flat["POS"][flat[p]] = np.broadcast_to(kidx, p.shape)[p]
        return True


    def _extend_compiled(self, nb, sl, c0: int, c1: int) -> bool:
        """``_extend`` by the compiled kernel, every slot of ``sl`` (a slice or an index array) in one call, each
        reading its family's store row (`_SlotArrays`). A slot whose column c0 - 1 changed stops it (False) with
        nothing written: the tape then starts again from column 0 (``sync``)."""
        sa = self._slot_arrays
        sa.update(self)
        fams, rows = sa.fam[: sa.n], sa.row[: sa.n]
        if isinstance(sl, slice):
            slots = np.arange(sl.start or 0, sl.stop, dtype=np.intp)
            fams, rows = fams[sl], rows[sl]
        else:
            slots = np.ascontiguousarray(sl, dtype=np.intp)
            fams, rows = fams[slots], rows[slots]
        addrs, shapes, held = sa.arrays(self._fams)   # (``held``: alive until the call returns)
        done = nb.extend(addrs, shapes, fams, rows, slots, c0, c1, c0 > 0, self._cells, self._ints, self._f0)
        if done < 0:
            raise IndexError(f"tape: columns [{c0}, {c1}) or rows beyond a family's store array")
        return done == 1


class _SlotArrays:
    """A tape's per-slot family index and store row as int arrays (appended as slots are registered), and its
    families' store arrays by address (kept while the same arrays serve), for the compiled extension."""

    __slots__ = ("fam", "row", "n", "datas", "held", "addrs", "shapes")

    def __init__(self):
        self.fam = np.zeros(64, dtype=np.intp)
        self.row = np.zeros(64, dtype=np.intp)
        self.n = 0
        self.datas: list = []
        self.held: list = []
        self.addrs = np.zeros(0, dtype=np.intp)
        self.shapes = np.zeros((0, 2), dtype=np.intp)

    def update(self, tape) -> None:
        """Append the slots registered since the last update (the tape's lists only grow)."""
        S = len(tape._row_of)
        n = self.n
        if S == n:
            return
        if S > len(self.fam):
            cap = max(S, 2 * len(self.fam))
            fam, row = np.zeros(cap, dtype=np.intp), np.zeros(cap, dtype=np.intp)
            fam[:n], row[:n] = self.fam[:n], self.row[:n]
            self.fam, self.row = fam, row
        self.fam[n:S] = tape._fam_of[n:S]
        self.row[n:S] = tape._row_of[n:S]
        self.n = S

    def arrays(self, fams: list) -> tuple:
        """(addresses, shapes, the arrays addressed: the caller holds them during its call) of the families' store
        arrays: C-contiguous float64 arrays (the store's) are read in
        place, their addresses kept while the same arrays (same objects; the store replaces an array when it
        grows; an array held here cannot be resized in place: numpy's reference check refuses) serve; anything
        else is read from a copy made for this call."""
        datas = self.datas
        if len(datas) == len(fams) and all(f._data is d for f, d in zip(fams, datas)):
            return self.addrs, self.shapes, self.held
        datas = [f._data for f in fams]
        held = [d if d.dtype == np.float64 and d.ndim == 2 and d.flags.c_contiguous
                else np.ascontiguousarray(d, dtype=np.float64).reshape(d.shape[0], -1) for d in datas]
        addrs = np.array([a.ctypes.data for a in held], dtype=np.intp)
        shapes = np.array([a.shape for a in held], dtype=np.intp).reshape(len(held), 2)
        if all(a is d for a, d in zip(held, datas)):
            self.datas, self.held, self.addrs, self.shapes = datas, held, addrs, shapes
        else:
            self.datas, self.held = [], []
        return addrs, shapes, held


class KernelSpec:
    """Rows of one kernel call: a slot, a window (range, offset in ms) and a function code per row."""

    def __init__(self, slots: np.ndarray, range_ms: np.ndarray, offset_ms: np.ndarray, codes: np.ndarray):
        self.slots = np.asarray(slots, dtype=np.intp)
        self.range_ms = np.asarray(range_ms, dtype=np.int64)
        self.offset_ms = np.asarray(offset_ms, dtype=np.int64)
        self.codes = np.asarray(codes, dtype=np.int8)
        r = self.range_ms
        # rangefuncs._range_seconds per row; 1.0 (an exact no-op divisor) where no rate is taken
        rs = (r // 1000).astype(np.float64) + ((r % 1000) * 1_000_000).astype(np.float64) / 1e9
        self.rs = np.where(self.codes == CODES["rate"], rs, 1.0)[:, None]
        self.rs_row = np.ascontiguousarray(self.rs[:, 0])
        self.counter = ((self.codes == CODES["rate"]) | (self.codes == CODES["increase"]))[:, None]
        self.present = sorted(set(self.codes.tolist()))
        self.ext = any(c in _EXTRAPOLATED for c in self.present)
        self.window_ms = (self.range_ms + self.offset_ms)[:, None]
        self.has_counter = bool(self.counter.any())
        self.has_rate = bool((self.codes == CODES["rate"]).any())
        self.only_ext = all(c in _EXTRAPOLATED for c in self.present)
        self.col = self.slots[:, None]
        #: the rows of each function the kernel does not extrapolate
        self.rows_of = {c: np.flatnonzero(self.codes == c) for c in self.present if c not in _EXTRAPOLATED}
        # runs of rows with the same window (a plan lists each range call's rows together): the window bounds are
        # computed once per run and repeated over its rows (the same integers); None where runs do not pay
        self.runs = None
        R = len(self.slots)
        if R:
            o = self.offset_ms
            starts = np.flatnonzero(np.concatenate(([True], (r[1:] != r[:-1]) | (o[1:] != o[:-1]))))
            if 4 * len(starts) <= R:
                run_r, run_o = r[starts][:, None], o[starts][:, None]
                self.runs = (np.diff(np.append(starts, R)), run_r, run_o, run_r + run_o)

    @classmethod
    def of_parts(cls, parts: list, windows: list) -> "KernelSpec":
        """The spec of the rows ``parts[0]``, then ``parts[1]``, ... (arrays of slots), the rows of part ``k`` all
        with the window ``windows[k]`` = (range ms, offset ms, code): the very fields ``KernelSpec`` gives for those
        rows listed one by one, found per part (a plan's kernel range node) instead of per row.

        >>> a = KernelSpec.of_parts([np.array([4, 5]), np.array([], dtype=np.intp), np.array([1])],
        ...                         [(300_000, 0, CODES["rate"]), (60_000, 0, CODES["delta"]), (60_500, 0, 6)])
        >>> b = KernelSpec(np.array([4, 5, 1]), np.array([300_000, 300_000, 60_500]), np.zeros(3, np.int64),
        ...                np.array([CODES["rate"], CODES["rate"], 6]))
        >>> a.slots.tolist(), a.rs_row.tolist(), a.present, list(a.rows_of), a.runs is None
        ([4, 5, 1], [300.0, 300.0, 1.0], [0, 6], [6], True)
        >>> all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("rs", "counter", "window_ms", "col"))
        True
        """
        self = cls.__new__(cls)
        sizes = [len(p) for p in parts]
        if 0 in sizes:   # (a part without rows adds no row, no code and no run)
            keep = [k for k, n in enumerate(sizes) if n]
            parts, windows, sizes = [parts[k] for k in keep], [windows[k] for k in keep], [sizes[k] for k in keep]
        n = np.asarray(sizes, dtype=np.intp)
        self.slots = np.concatenate(parts).astype(np.intp, copy=False) if parts else np.zeros(0, dtype=np.intp)
        (range_ms, offset_ms, kc, window_ms, rs_part, counter_part, present, self.ext, self.has_counter,
         self.has_rate, self.only_ext, run_parts, run_r, run_o, run_w) = _part_fields(tuple(windows))
        self.present = list(present)
        self.range_ms = np.repeat(range_ms, n)
        self.offset_ms = np.repeat(offset_ms, n)
        self.codes = codes = np.repeat(kc, n)
        self.window_ms = np.repeat(window_ms, n)[:, None]
        self.rs_row = np.repeat(rs_part, n)
        self.rs = self.rs_row[:, None]
        self.counter = np.repeat(counter_part, n)[:, None]
        self.col = self.slots[:, None]
        self.rows_of = {c: np.flatnonzero(codes == c) for c in self.present if c not in _EXTRAPOLATED}
        self.runs = None
        R = len(self.slots)
        # (a run starts at a part whose window (range, offset) differs from the part before it: its rows are those
        # of its parts)
        if R and 4 * len(run_parts) <= R:
            self.runs = (np.add.reduceat(n, run_parts), run_r, run_o, run_w)
        return self


#: ``_part_fields`` per tuple of part windows (a plan's builds list the same few), emptied past ``PART_FIELDS_MAX``
_PART_FIELDS: dict[tuple, tuple] = {}
PART_FIELDS_MAX = 64


def _part_fields(windows: tuple) -> tuple:
    """The fields of ``KernelSpec.of_parts`` that depend on its parts' windows only, per part (repeated over the
    part's rows there), kept per windows tuple (its values: nothing can go stale; the arrays are read-only):
    (range ms, offset ms, codes, range + offset, ``rangefuncs._range_seconds`` of a rate's range and 1.0 elsewhere,
    whether the function takes counter resets, the codes present, ext, has_counter, has_rate, only_ext, the parts
    where a run of one window starts, the runs' range, offset and range + offset as columns)."""
    hit = _PART_FIELDS.get(windows)
    if hit is not None:
        return hit
    if len(_PART_FIELDS) >= PART_FIELDS_MAX:
        _PART_FIELDS.clear()
    kr = [int(w[0]) for w in windows]
    ko = [int(w[1]) for w in windows]
    kc = np.asarray([w[2] for w in windows], dtype=np.int8)
    present = tuple(sorted(set(kc.tolist())))
    # (the float64 operations of rangefuncs._range_seconds' per-row arithmetic: the same bits)
    rate, inc = CODES["rate"], CODES["increase"]
    kcl = kc.tolist()
    rs = np.asarray([float(r // 1000) + float((r % 1000) * 1_000_000) / 1e9 if c == rate else 1.0
                     for r, c in zip(kr, kcl)], dtype=np.float64)
    counter = np.asarray([c == rate or c == inc for c in kcl], dtype=bool)
    run_parts, prev = [], None
    for k, ro in enumerate(zip(kr, ko)):
        if ro != prev:
            run_parts.append(k)
            prev = ro
    run_r = np.asarray([kr[k] for k in run_parts], dtype=np.int64)[:, None]
    run_o = np.asarray([ko[k] for k in run_parts], dtype=np.int64)[:, None]
    out = (np.asarray(kr, dtype=np.int64), np.asarray(ko, dtype=np.int64), kc,
           np.asarray([r + o for r, o in zip(kr, ko)], dtype=np.int64), rs, counter, present,
           any(c in _EXTRAPOLATED for c in present), rate in present or inc in present, rate in present,
           all(c in _EXTRAPOLATED for c in present), np.asarray(run_parts, dtype=np.intp), run_r, run_o, run_r + run_o)
    for x in out:
        if isinstance(x, np.ndarray):
            x.flags.writeable = False
    _PART_FIELDS[windows] = out
    return out


def window_kernel(tape: Tape, spec: KernelSpec, times: np.ndarray, t0_ms: int = 0, step_ms: int | None = None,
                  out: tuple | None = None):
    """(values, present), each (rows, times), for the spec's rows at evaluation times (ms). ``out``: (values,
    present) arrays of that shape (float64, bool; C-contiguous) to write them into (the caller's buffers, taken again
    at every call: see ``program.Arena``) and return; by default fresh ones."""
    st = step_ms if step_ms is not None else int(round(tape.store.step_s * 1000))
    N = min(tape.N, tape.store.n_ticks)
    R, T = len(spec.slots), len(times)
    if out is not None:
        assert out[0].shape == (R, T) and out[1].shape == (R, T), "window_kernel: out of another shape"
    if N == 0 or R == 0:
        if out is None:
            return np.zeros((R, T)), np.zeros((R, T), bool)
        out[0].fill(0.0)
        out[1].fill(False)
        return out
    cap = tape.cap_t
    nb = kernels()
    if nb is not None:   # the same values, one fused pass per (row, time) (compiled.py)
        ov, op = out if out is not None else (np.empty((R, T)), np.empty((R, T), dtype=bool))
        nb.window(tape._cells, tape._ints, tape._f0, spec.slots, spec.range_ms, spec.offset_ms, spec.codes, spec.rs_row,
                  np.asarray(times, dtype=np.int64), int(t0_ms), int(st), int(N), int(cap),
                  spec.has_counter, spec.has_rate, ov, op)
        return ov, op
    t_np = time.process_time()
    v, p = _window_numpy(tape, spec, times, t0_ms, st, N, R, T, cap)
    note_numpy(time.process_time() - t_np)   # (counts towards loading the compiled kernels, see compiled.py)
    if out is None:
        return v, p
    out[0][...] = v
    out[1][...] = p
    return out


def _extreme(V: np.ndarray, base: np.ndarray, S: int, first: np.ndarray, last: np.ndarray, has: np.ndarray,
             is_max: bool) -> np.ndarray:
    """``max_over_time`` / ``min_over_time`` of (rows, times) windows whose present samples lie in the columns
    ``first .. last`` of each row's slot (``base``: the slots, (rows, 1); ``V``: the flat values, cell
    ``column * S + slot``), as ``rangefuncs`` defines it: the first present sample, replaced by each strictly
    greater (smaller) one in column order (a NaN cell is absent: no comparison holds for it). 0.0 where ``has`` is
    False.

    >>> V = np.array([3.0, np.nan, -0.0, 5.0, 0.0, 5.0])   # one slot (S = 1), columns 0..5
    >>> one = np.zeros((1, 1), dtype=np.intp)
    >>> _extreme(V, one, 1, np.array([[0]]), np.array([[5]]), np.array([[True]]), True).tolist()
    [[5.0]]
    >>> m = _extreme(V, one, 1, np.array([[2]]), np.array([[4]]), np.array([[True]]), False)   # -0.0 first: kept
    >>> float(m[0, 0]), np.signbit(m[0, 0])
    (-0.0, np.True_)
    """
    m = np.where(has, V[base + first * S], 0.0)
    L = int((last - first).max()) + 1 if has.any() else 0
    for k in range(1, L):
        j = first + k
        inside = has & (j <= last)
        x = V[base + np.where(inside, j, first) * S]
        better = (x > m) if is_max else (x < m)
        m = np.where(inside & better, x, m)
    return m


def _window_numpy(tape: Tape, spec: KernelSpec, times: np.ndarray, t0_ms: int, st: int, N: int, R: int, T: int,
                  cap: int):
    """``window_kernel`` by numpy: the reference."""
    S = tape.cap_s  # the cells are column-major: [slot, column] is at flat offset column * S + slot of ``_flat``
    base = spec.col
    if spec.runs is not None:   # per run of rows with one window, repeated over its rows
        lens, run_r, run_o, run_w = spec.runs
        ref = times[None, :] - run_o
        lo = np.maximum(-((run_r + t0_ms - ref) // st), 0)
        hi = np.minimum((ref - t0_ms) // st, N - 1)
        nonempty = np.repeat(hi >= lo, lens, axis=0)
        hi_c = np.repeat(np.maximum(hi, 0), lens, axis=0)
        lo = np.repeat(lo, lens, axis=0)
        win_start = np.repeat(times[None, :] - run_w, lens, axis=0) if spec.ext else None
        ref = np.repeat(ref, lens, axis=0)
    else:
        ref = times[None, :] - spec.offset_ms[:, None]
        lo = np.maximum(-((spec.range_ms[:, None] + t0_ms - ref) // st), 0)
        hi = np.minimum((ref - t0_ms) // st, N - 1)
        nonempty = hi >= lo
        hi_c = np.maximum(hi, 0)
        win_start = times[None, :] - spec.window_ms if spec.ext else None
    F = tape._flat   # flat views, cell ``column * S + slot`` (strided: indexed, never ``take``, which would copy)
    CS = F["CS"]
    before = CS[base + np.minimum(lo, N) * S]
    hi_at = base + hi_c * S   # flat offsets of the last column of each window
    cnt = np.where(nonempty, CS[hi_at + S] - before, 0)
    has = cnt > 0
    last = np.where(has, F["PV"][hi_at], 0)
    first = np.where(has, F["POS"][base + np.minimum(before, cap - 1) * S], 0)
    ilast = base + last * S
    ifirst = base + first * S
    codes = spec.present
    V = F["V"]
    out_v = out_p = None
    if spec.ext:
        ok = cnt >= 2
        fv = V[ifirst]
        lv = V[ilast]
        result = lv - fv
        if spec.has_counter:
            RC = F["RC"]
            nres = np.where(ok & spec.counter, RC[ilast] - RC[ifirst], 0)
            if nres.any():
                one = nres == 1
                pos = F["LR"][ilast]
                # the value before the last reset: at the last present column before it (the reset's column
                # is >= 1, a reset needs an earlier sample)
                before_reset = F["PV"][base + np.maximum(pos - 1, 0) * S]
                result = np.where(one, result + V[base + np.maximum(before_reset, 0) * S], result)
                for r, t in np.argwhere(nres >= 2):
                    a, b = int(first[r, t]), int(last[r, t])
                    row = tape.V[spec.slots[r]]
                    rv = row[b] - row[a]
                    prev = row[a]
                    for j in range(a + 1, b + 1):
                        x = row[j]
                        if x != x:
                            continue
                        if x < prev:
                            rv += prev
                        prev = x
                    result[r, t] = rv
        st64 = np.int64(st)   # (first and last may be int32: times in int64)
        ft = t0_ms + first * st64
        lt = t0_ms + last * st64
        with np.errstate(all="ignore"):
            d_start = (ft - win_start).astype(np.float64) / 1000
            d_end = (ref - lt).astype(np.float64) / 1000
            sampled = (lt - ft).astype(np.float64) / 1000
            avg = sampled / (cnt - 1).astype(np.float64)
            if spec.has_counter:
                cond = (result > 0) & (fv >= 0) & spec.counter
                d_zero = sampled * (fv / result)
                d_start = np.where(cond & (d_zero < d_start), d_zero, d_start)
            thr = avg * 1.1
            half = avg / 2
            ext = sampled + np.where(d_start < thr, d_start, half)
            ext = ext + np.where(d_end < thr, d_end, half)
            factor = ext / sampled
            if spec.has_rate:
                factor = factor / spec.rs
            out_v = result * factor
        out_p = ok
        if spec.only_ext:
            return out_v, out_p
    if out_v is None:
        out_v = np.zeros((R, T))
        out_p = np.zeros((R, T), bool)
    else:
        out_p = out_p.copy()   # (``ok``) written in place below
    # the other functions on their own rows only (the arrays above are fresh: written in place)
    for c in codes:
        if c in _EXTRAPOLATED:
            continue
        rows = spec.rows_of[c]
        if c in (3, 4):
            A = F["CC" if c == 3 else "RC"]
            out_v[rows] = (A[ilast[rows]] - A[ifirst[rows]]).astype(np.float64)
        elif c == 5:
            out_v[rows] = cnt[rows].astype(np.float64)
        elif c == 6:
            out_v[rows] = V[ilast[rows]]
        elif c in (8, 9):
            out_v[rows] = _extreme(V, base[rows], S, first[rows], last[rows], has[rows], c == 8)
        else:
            out_v[rows] = 1.0
        out_p[rows] = has[rows]
    return out_v, out_p
