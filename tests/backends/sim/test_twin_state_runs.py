"""The metric writer's state families against their definitions, through churn, drains, OOM kills, node loss,
restarts and scaling (series that appear, change labels and disappear):

- `MetricWriter._update` re-derives an object whose series changed by matching its old series by (family,
  labels); the definition (`_update_by_entries`, as first written) looks every series up in its family and
  compares by (family, row). Same entries, rows, current values, live ranges, dirty families and store.
- closed state runs are written when the store is next read (`flush`, one family's runs one after the other);
  the definition writes each at once where `refresh_state` closes it. The same store at every read, and a twin
  whose store nobody reads keeps at most `PENDING_RUNS` closed runs.
- the mesh response-code series that start inside a traffic write are cleared before their run by their rows
  (`_flat_row`), as the lookup of their flat positions among the enabled ones found them."""

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import metrics as metrics_mod
from sremarathon_env.backends.sim.metrics import MetricWriter, _live_off

from tests.backends.sim.test_twin_caches import _drive
from tests.backends.sim.test_twin_writer_fastpaths import _run, _store_bytes


def _update_by_entries(self, key, sig, series, dirty, shape=None, values=None):
    """The definition of `MetricWriter._update` (as first written): every series of a changed object looked up
    in its family, its old entries compared by (family, row)."""
    old = self._objects.get(key)
    if old is not None and old[0] == sig:
        return False
    keys, vals = series()
    before = None if old is None else old[1].copy()
    entries, rows = {}, []
    for (name, lv), value in zip(keys, vals):
        fam = self._fams.get(name)
        if fam is None:
            fam = self._fams[name] = self.store.family(name, self._labels(name))
        row = fam.row(lv)
        rows.append(row)
        entries[(name, row)] = value
        if before is not None:
            prev = before.pop((name, row), None)
            if prev is not None and prev == value:
                continue
        vl = self._cur.get(name)
        if vl is None or row >= len(vl[0]):
            vl = self._grow_cur(name, row)
        vl[0][row] = value
        vl[1][row] = True
        metrics_mod._live_on(vl, row)
        dirty.add(name)
    for (name, row) in before or ():
        vl = self._cur[name]
        vl[0][row] = np.nan
        vl[1][row] = False
        _live_off(vl, row)
        dirty.add(name)
    if len(entries) == len(keys):
        self._objects[key] = (sig, entries, keys, rows, vals, shape)
    else:
        self._objects[key] = (sig, entries, None, None, None, None)
    return True


def _writer_state(w: MetricWriter) -> tuple:
    cur = {name: (vals.tobytes(), live.tobytes(), lo, hi) for name, (vals, live, lo, hi) in w._cur.items()}
    objs = {key: (o[0], list(o[1].items()), o[2], o[3], o[4]) for key, o in w._objects.items()}
    return cur, objs


def _drive_reads(sim: SimBackend) -> list:
    """`_drive`'s run, the store read after each advance (and after its end)."""
    reads = []
    advance = sim.advance_to

    def read_after(t):
        out = advance(t)
        reads.append(_store_bytes(sim))
        return out

    sim.advance_to = read_after
    _drive(sim)
    del sim.advance_to
    reads.append(_store_bytes(sim))
    return reads


@pytest.mark.parametrize("seed", [3, 5])
def test_update_by_kept_series_equals_the_lookup_by_entries(monkeypatch, seed):
    fast = MetricWriter._update
    runs = {}
    for name, update in (("fast", fast), ("plain", _update_by_entries)):
        log = {"dirty": [], "reshape": 0}

        def logged(self, key, sig, series, dirty, shape=None, values=None, update=update, log=log):
            old = self._objects.get(key)
            before = set(dirty)
            out = update(self, key, sig, series, dirty, shape, values)
            log["dirty"].append((key, out, sorted(set(dirty) - before)))
            if out and old is not None and old[2] is not None and self._objects[key][2] != old[2]:
                log["reshape"] += 1   # the series changed: the kept ones matched by (family, labels)
            return out

        monkeypatch.setattr(MetricWriter, "_update", logged)
        sim = SimBackend("online-boutique", seed=seed)
        runs[name] = (_drive_reads(sim), _writer_state(sim.writer), log)
    (fast_reads, fast_state, fast_log), (plain_reads, plain_state, plain_log) = runs["fast"], runs["plain"]
    assert fast_log["reshape"] == plain_log["reshape"] > 20
    assert fast_log["dirty"] == plain_log["dirty"] and len(fast_log["dirty"]) > 200
    assert fast_state == plain_state
    assert len(fast_reads) == len(plain_reads) > 8
    for a, b in zip(fast_reads, plain_reads):
        assert [x[:3] for x in a] == [x[:3] for x in b]
        assert [x[3] for x in a] == [x[3] for x in b]


def _close_at_once(refresh):
    def refresh_now(self, tick):   # the definition: each closed run written where it is closed
        refresh(self, tick)
        assert self._n_closed == sum(len(c) for c in self._closed.values())
        if self._closed:
            closed, self._closed, self._n_closed = self._closed, {}, 0
            for name, runs in closed.items():
                for r0, r1, values, a, b in runs:
                    self._fams[name]._data[r0:r1, a:b] = values[:, None]
    return refresh_now


@pytest.mark.parametrize("app,seed", [("online-boutique", 3), ("online-boutique", 6)])
def test_closed_runs_written_at_the_next_read_equal_writing_them_at_once(monkeypatch, app, seed):
    seen = {"closed": 0, "max": 0}
    refresh = MetricWriter.refresh_state

    def counted(self, tick):
        refresh(self, tick)
        seen["closed"] += bool(self._closed)
        seen["max"] = max(seen["max"], self._n_closed)

    monkeypatch.setattr(MetricWriter, "refresh_state", counted)
    deferred = _drive_reads(SimBackend(app, seed=seed))
    assert seen["closed"] >= 5 and seen["max"] > 20
    monkeypatch.setattr(MetricWriter, "refresh_state", _close_at_once(refresh))
    at_once = _drive_reads(SimBackend(app, seed=seed))
    assert len(deferred) == len(at_once) > 8
    for a, b in zip(deferred, at_once):
        assert [x[:3] for x in a] == [x[:3] for x in b]
        assert [x[3] for x in a] == [x[3] for x in b]


def test_a_whole_faulted_run_writes_the_same_store_with_runs_closed_at_once(monkeypatch):
    """Train Ticket (new response codes, node loss, restarts, scaling), read once at the end."""
    deferred = _store_bytes(_run("train-ticket", 4))
    monkeypatch.setattr(MetricWriter, "refresh_state", _close_at_once(MetricWriter.refresh_state))
    at_once = _store_bytes(_run("train-ticket", 4))
    assert [x[:3] for x in deferred] == [x[:3] for x in at_once]
    assert [x[3] for x in deferred] == [x[3] for x in at_once]


def test_closed_runs_pending_are_bounded_when_nobody_reads(monkeypatch):
    monkeypatch.setattr(metrics_mod, "PENDING_RUNS", 4)
    seen = {"max": 0, "bound": 0}
    refresh, flush = MetricWriter.refresh_state, MetricWriter.flush

    def counted(self, tick):
        refresh(self, tick)
        seen["max"] = max(seen["max"], self._n_closed)

    def flush_counted(self, upto):
        seen["bound"] += self._n_closed > metrics_mod.PENDING_RUNS   # written because too many wait
        flush(self, upto)

    monkeypatch.setattr(MetricWriter, "refresh_state", counted)
    monkeypatch.setattr(MetricWriter, "flush", flush_counted)
    sim = SimBackend("online-boutique", seed=3)
    sim.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=10_000))   # OOM kills, restarts
    sim.scale("frontend", 4)
    sim.restart("checkoutservice")
    sim.advance_to(600)
    assert seen["bound"] >= 2 and 0 < seen["max"] <= 4


def test_new_response_code_rows_by_flat_row_are_the_lookups(monkeypatch):
    """The rows of the response-code series a traffic write enables (those a later run of the write clears
    before it starts) by `_flat_row` are the ones the lookup among the enabled flat positions finds."""
    checked = {"new": 0}
    write = MetricWriter.write_traffic

    def write_checked(self, k0, K, dt, out, uh, bounds=None, incs=None):
        on_before = self._flat_row >= 0
        write(self, k0, K, dt, out, uh, bounds, incs)
        new = np.flatnonzero((self._flat_row >= 0) & ~on_before)
        if len(new):
            want = self.req_rows[np.isin(self.req_flat, new)]
            assert self._flat_row[new].tolist() == want.tolist()   # (both in flat order)
            checked["new"] += 1

    monkeypatch.setattr(MetricWriter, "write_traffic", write_checked)
    sim = SimBackend("online-boutique", seed=2)
    sim.advance_to(60)
    sim.apply_effect(Effect(kind="error_rate", service=sim.app.services[1].name, rate=0.5))
    sim.scale("frontend", 3)
    sim.advance_to(300)
    sim.store.n_ticks
    assert checked["new"] >= 1


@pytest.mark.parametrize("app", ["online-boutique", "astronomy-shop"])
def test_joined_traffic_writes_join_only_the_fields_they_read(monkeypatch, app):
    """Pending traffic writes of stepped outputs are joined for one write (`complete`) with the fields
    `write_traffic` reads alone (`TRAFFIC_FIELDS`; the others None, so a read of one would fail): the same store
    as joining every field (the definition), with span metrics (Astronomy Shop) and without."""
    joined = {"n": 0}
    real = metrics_mod.concat

    def counted(outs, fields=None):
        joined["n"] += 1
        return real(outs, fields)

    def every_field(outs, fields=None):
        return real(outs)

    def run(concat):
        monkeypatch.setattr(metrics_mod, "concat", concat)
        sim = SimBackend(app, seed=4)
        reads = []
        for k, t in enumerate(range(30, 900, 45)):   # several advances (stepped runs) between reads
            if k == 6:
                sim.apply_effect(Effect(kind="error_rate", service=sim.app.services[2].name, rate=0.3))
            if k == 9:
                sim.scale(sim.app.services[0].name, 3)
            sim.advance_to(t)
            if k % 3 == 2:
                reads.append(_store_bytes(sim))
        reads.append(_store_bytes(sim))
        return reads

    fast = run(counted)
    assert joined["n"] >= 5
    plain = run(every_field)
    assert len(fast) == len(plain)
    for a, b in zip(fast, plain):
        assert [x[:3] for x in a] == [x[:3] for x in b]
        assert [x[3] for x in a] == [x[3] for x in b]
