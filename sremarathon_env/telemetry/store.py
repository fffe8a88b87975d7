"""A columnar store of Prometheus-style series sampled at a fixed scrape interval.

The twin writes one column per tick for a whole family of series at once (numpy, no per-sample
objects); the PromQL engine reads whole families as matrices. A sample that was not written is NaN,
which the engine treats as "no sample" (a series that stops being written is stale from then on, as
with Prometheus's staleness markers when a target drops a series).

>>> import numpy as np
>>> store = MetricStore(step_s=15.0, capacity=8)
>>> fam = store.family("up", ("service",))
>>> rows = fam.rows([("frontend",), ("cart",)])
>>> store.write(fam, rows, tick=0, values=np.array([1.0, 0.0]))
>>> store.n_ticks, fam.values(store.n_ticks).tolist()
(1, [[1.0], [0.0]])
>>> fam.labels(1)
{'__name__': 'up', 'service': 'cart'}
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


#: rows a family's array has room for at first, and the factor it grows by (small and doubling: the size
#: allocated, which tracemalloc counts touched or not, stays what it was): the rows past the ones in use are
#: allocated, not initialised (never touched: no page faults, no fill), and growing copies the rows in use
ROWS_RESERVED = 16
ROWS_GROWTH = 2
#: rows made ready (NaN) at a time beyond the last used one, at most (doubling from 4 up to this step)
FILL_STEP = 64
#: tick columns a store allocates at first (at most its capacity); the first tick past them grows every family
#: to the full capacity at once. A short run (an RL episode: 113 ticks) then makes its rows ready (NaN) and
#: touches their memory over these columns only, not over a whole marathon's (368 at 15 s)
COLS_RESERVED = 128


@dataclass
class Family:
    """All series of one metric name that share a label-name tuple. ``_data`` holds a row per series
    (its unwritten samples NaN); rows from ``_filled`` on are spare capacity, not yet initialised
    (never read: readers index the rows in use, ``< len(self)``). ``_capacity``: the tick columns
    allocated (the store's `MetricStore._cols`, all of them NaN until written in the rows in use)."""

    name: str
    label_names: tuple[str, ...]
    _capacity: int
    _index: dict[tuple[str, ...], int] = field(default_factory=dict)
    _label_values: list[tuple[str, ...]] = field(default_factory=list)
    _data: np.ndarray = field(default=None)  # type: ignore[assignment]
    _filled: int = 0
    #: the store's pending-writes cell (`MetricStore.defer`): values and length complete them first
    _pending: list = field(default_factory=lambda: [None], repr=False, compare=False)
    #: rows made ready per (name, label names) by earlier families of its kind (`MetricStore`'s ``rows_hint``):
    #: the rows allocated at first (still uninitialised), kept up to date by `_fill`; None: no hints
    _hints: dict | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = ROWS_RESERVED
        if self._hints is not None:
            n = max(n, self._hints.get((self.name, self.label_names), 0))
        self._data = np.empty((n, self._capacity))
        self._filled = 0

    def __getstate__(self) -> dict:
        """Copies and pickles hold the rows in use (and the ready ones), not the spare capacity (and no pending
        writes: they are done first)."""
        if self._pending[0] is not None:
            self._complete()
        state = self.__dict__.copy()
        state["_data"] = self._data[: self._filled]
        state["_hints"] = None   # (the store's, not the copy's)
        return state

    def __len__(self) -> int:
        if self._pending[0] is not None:
            self._complete()
        return len(self._label_values)

    def _complete(self) -> None:
        pending = self._pending[0]
        if pending is not None:
            self._pending[0] = None
            pending()

    def row(self, label_values: tuple[str, ...]) -> int:
        """Row index of a series, created on first use (rows are append-only)."""
        idx = self._index.get(label_values)
        if idx is None:
            if len(label_values) != len(self.label_names):
                raise ValueError(f"{self.name}: expected {len(self.label_names)} label values, got {label_values!r}")
            idx = len(self._label_values)
            self._index[label_values] = idx
            self._label_values.append(label_values)
            if idx >= self._filled:
                self._fill(idx)
        return idx

    def reserve(self, n: int) -> None:
        """Allocate room for ``n`` rows in all (spare rows stay uninitialised), for a caller about to create
        that many: one allocation instead of doubling through the sizes below (each a copy of the rows in use)."""
        data = self._data
        if n > data.shape[0]:
            grown = np.empty((n, data.shape[1]))
            grown[: self._filled] = data[: self._filled]
            self._data = grown

    def _fill(self, idx: int) -> None:
        """Make rows up to ``idx`` (and a few beyond) NaN, growing the allocation to hold them."""
        data = self._data
        lo = self._filled
        if idx >= data.shape[0]:
            grown = np.empty((max(ROWS_GROWTH * data.shape[0], idx + 1, 4), data.shape[1]))
            grown[:lo] = data[:lo]
            self._data = data = grown
        hi = min(data.shape[0], max(idx + 1, lo + min(max(lo, 4), FILL_STEP)))
        data[lo:hi] = np.nan
        self._filled = hi
        hints = self._hints
        if hints is not None and hints.get((self.name, self.label_names), 0) < hi:
            hints[(self.name, self.label_names)] = hi

    def rows(self, label_values: list[tuple[str, ...]]) -> np.ndarray:
        return np.fromiter((self.row(v) for v in label_values), dtype=np.intp, count=len(label_values))

    def labels(self, row: int) -> dict[str, str]:
        d = {"__name__": self.name}
        d.update(zip(self.label_names, self._label_values[row]))
        return d

    def label_values(self, row: int) -> tuple[str, ...]:
        return self._label_values[row]

    def values(self, n_ticks: int) -> np.ndarray:
        """View (n_series, n_ticks) of the samples written so far; NaN = no sample."""
        if self._pending[0] is not None:
            self._complete()
        return self._data[: len(self._label_values), :n_ticks]

    def _grow_time(self, capacity: int) -> None:
        grown = np.empty((self._data.shape[0], capacity))
        n = self._filled
        grown[:n, : self._data.shape[1]] = self._data[:n]
        grown[:n, self._data.shape[1]:] = np.nan
        self._data = grown
        self._capacity = capacity


class MetricStore:
    """Families of series on a regular time grid: tick ``k`` is at ``t0_s + k * step_s``."""

    def __init__(self, step_s: float = 15.0, capacity: int = 512, t0_s: float = 0.0, cols: int = 0,
                 rows_hint: dict | None = None):
        """``cols``: the tick columns a run is known to write (e.g. a marathon's): allocated at once when more
        than `COLS_RESERVED` (up to the capacity), so the families never grow along time mid-run (a copy of
        every family). ``rows_hint`` (optional, shared by the stores of one kind, e.g. one app's twins): rows per
        (family name, label names) that earlier families of that kind made ready; a new family allocates as many
        at once (uninitialised: untouched memory until rows come into use), so that a run like an earlier one
        does not grow its families by copying; the store keeps it up to date. Neither changes any sample."""
        self.step_s = float(step_s)
        self.t0_s = float(t0_s)
        self._capacity = int(capacity)
        #: tick columns every family has allocated now (COLS_RESERVED or ``cols``, then the capacity: `_need`)
        self._cols = min(self._capacity, max(COLS_RESERVED, int(cols)))
        self._families: dict[str, list[Family]] = {}
        self._order: list[Family] = []
        self._n = 0
        #: [what completes the writes a writer left pending (`defer`), or None], shared with the families
        self._pending: list = [None]
        self._rows_hint = rows_hint

    @property
    def n_ticks(self) -> int:
        """Ticks written so far: every sample below is final (writes left pending are done first, `defer`)."""
        if self._pending[0] is not None:
            self.complete()
        return self._n

    @n_ticks.setter
    def n_ticks(self, n: int) -> None:
        self._n = n

    def defer(self, complete) -> None:
        """A writer left writes pending: ``complete()`` does them before anything reads the store - its
        ``n_ticks``, ``family``, ``families``, ``names``, ``times``, ``n_series``, ``nbytes``, or a family's
        ``values`` or length (readers learn through these which series exist and which ticks are final). A
        writer that defers again before a read passes the same ``complete``, which then does all its pending
        writes in order.

        >>> store = MetricStore(step_s=15.0, capacity=8)
        >>> fam = store.family("up", ("service",))
        >>> row = fam.row(("frontend",))
        >>> store.set_n_ticks(2)
        >>> store.defer(lambda: fam._data.__setitem__((row, slice(0, 2)), 1.0))
        >>> bool(fam._data[row, 0] == 1.0)   # pending: not written yet
        False
        >>> store.n_ticks, fam.values(store.n_ticks).tolist()
        (2, [[1.0, 1.0]])
        """
        self._pending[0] = complete

    def complete(self) -> None:
        """Do the writes left pending, if any (`defer`)."""
        pending = self._pending[0]
        if pending is not None:
            self._pending[0] = None
            pending()

    def family(self, name: str, label_names: tuple[str, ...]) -> Family:
        """Get or create the family ``name`` with exactly these label names."""
        if self._pending[0] is not None:
            self.complete()
        for fam in self._families.get(name, ()):
            if fam.label_names == label_names:
                return fam
        fam = Family(name, tuple(label_names), self._cols, _hints=self._rows_hint)
        fam._pending = self._pending
        self._families.setdefault(name, []).append(fam)
        self._order.append(fam)
        return fam

    @property
    def capacity(self) -> int:
        """The ticks a run is expected to write (a marathon's; readers may size their own arrays to it).
        The families allocate fewer columns at first (`COLS_RESERVED`) and grow to it when a tick needs them."""
        return self._capacity

    def families(self, name: str) -> list[Family]:
        if self._pending[0] is not None:
            self.complete()
        return list(self._families.get(name, ()))

    def names(self) -> list[str]:
        if self._pending[0] is not None:
            self.complete()
        return sorted(self._families)

    def write(self, fam: Family, rows: np.ndarray, tick: int, values: np.ndarray) -> None:
        """Write one column (tick) for the given rows."""
        if tick >= self._cols:
            self._need(tick + 1)
        fam._data[rows, tick] = values
        if tick + 1 > self._n:
            self._n = tick + 1

    def set_n_ticks(self, n: int) -> None:
        """Declare that ticks ``< n`` have been scraped (columns not written stay NaN)."""
        if n > self._cols:
            self._need(n)
        self._n = max(self._n, n)

    def _need(self, n: int) -> None:
        """Make columns ``< n`` writable: the capacity doubles (at least to ``n``) when they exceed it, and
        the families' columns grow to the capacity (new cells NaN)."""
        if n > self._capacity:
            self._capacity = max(n, self._capacity * 2)
        if n > self._cols:
            for fam in self._order:
                fam._grow_time(self._capacity)
            self._cols = self._capacity

    def times(self) -> np.ndarray:
        """Sample timestamps in seconds for the ticks written so far."""
        return self.t0_s + self.step_s * np.arange(self.n_ticks, dtype=np.float64)

    def tick_of(self, t_s: float) -> int:
        """Index of the last tick at or before ``t_s`` (-1 if before the first)."""
        return int(np.floor((t_s - self.t0_s) / self.step_s + 1e-9))

    def n_series(self) -> int:
        self.complete()
        return sum(len(f) for f in self._order)

    def nbytes(self) -> int:
        self.complete()
        return sum(f._data.nbytes for f in self._order)
