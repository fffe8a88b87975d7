"""The metric writer's state families against their definitions, through churn, drains, OOM kills, node loss,
restarts and scaling (series that appear, change labels and disappear):

- `MetricWriter._update` re-derives an object whose series changed by matching its old series by (family,
  labels); the definition (`_update_by_entries`, as first written) looks every series up in its family and
  compares by (family, row). Same entries, rows, current values, live ranges, dirty families and store.
- a state family's run is written up to a refresh's tick just before the family's first change there (`_close`),
  its current run up to the last tick at a store read (`flush`); the definition: every tick's column of every state
  family holds the family's current values as they were when the twin ran that tick. The same store at every
  read, through churn, faults and reads at any point.
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
        if name not in dirty:   # (its run written up to here before it changes)
            self._close(name, dirty)
        vl[0][row] = value
        vl[1][row] = True
        metrics_mod._live_on(vl, row)
    for (name, row) in before or ():
        if name not in dirty:
            self._close(name, dirty)
        vl = self._cur[name]
        vl[0][row] = np.nan
        vl[1][row] = False
        _live_off(vl, row)
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


@pytest.fixture(params=["0", "1"])
def numba_mode(request, monkeypatch):
    """The numpy writes (a run's rows first to last live, NaN between) and the compiled ones (the live rows alone,
    `kernels.fill_live`, and the whole range behind a refresh that started a run there)."""
    if request.param == "1":
        pytest.importorskip("numba")
    monkeypatch.setenv("SREMARATHON_NUMBA", request.param)
    from sremarathon_env.backends.sim.kernels import kernels
    assert (kernels() is not None) == (request.param == "1")
    return request.param


def _state_by_tick(monkeypatch):
    """Every tick a twin runs: its state families' current values then (the definition of their store columns)."""
    seen: list[tuple[int, int, dict]] = []
    run_block = SimBackend._run_block

    def snapped(self, k0, K, dt):
        w = self.writer
        cur = {name: w._cur[name][0].copy() for name in w._runs}
        n = run_block(self, k0, K, dt)
        seen.append((k0, n, cur))
        return n

    monkeypatch.setattr(SimBackend, "_run_block", snapped)
    return seen


def _assert_state_columns(sim: SimBackend, seen: list) -> int:
    """The twin's state families hold, at every tick, the values the family had when the twin ran it (NaN where a
    row had no live series); returns the cells compared."""
    n_ticks = sim.store.n_ticks
    w = sim.writer
    cells = 0
    assert seen and sum(n for _, n, _ in seen) == n_ticks
    for k0, n, cur in seen:
        for name in w._runs:
            fam = w._fams[name]
            rows = len(fam)
            want = np.full(rows, np.nan)
            vals = cur.get(name)
            if vals is not None:
                want[: min(rows, len(vals))] = vals[:rows]
            got = fam.values(n_ticks)[:, k0:k0 + n]
            assert np.array_equal(got, np.repeat(want[:, None], n, axis=1), equal_nan=True), (name, k0, n)
            assert (np.isnan(got) == np.isnan(want)[:, None]).all()
            cells += got.size
    return cells


@pytest.mark.parametrize("seed", [3, 6])
def test_state_runs_give_each_tick_the_values_it_ran_with(monkeypatch, numba_mode, seed):
    """Reads after every advance through churn, faults and node loss (runs written up to each read, then closed by
    later refreshes): the definition's columns at the end."""
    closes = {"written": 0}
    write_run = MetricWriter._write_run

    def counted(self, name, run, upto, ks=None):
        closes["written"] += upto > run[1]
        return write_run(self, name, run, upto, ks)

    monkeypatch.setattr(MetricWriter, "_write_run", counted)
    seen = _state_by_tick(monkeypatch)
    sim = SimBackend("online-boutique", seed=seed)
    reads = _drive_reads(sim)
    assert len(reads) > 8 and closes["written"] > 100
    assert _assert_state_columns(sim, seen) > 10_000


@pytest.mark.parametrize("app,seed", [("online-boutique", 3), ("train-ticket", 4), ("astronomy-shop", 2)])
def test_state_runs_of_a_twin_read_once_give_each_tick_its_values(monkeypatch, numba_mode, app, seed):
    """OOM kills, restarts and scaling, the store read only at the end (every run closed where a refresh closes
    it, the current ones written at the read): the definition's columns."""
    seen = _state_by_tick(monkeypatch)
    sim = SimBackend(app, seed=seed)
    sim.apply_effect(Effect(kind="memory_hog", service=sim.app.service_names[1], mi=10_000))
    sim.scale(sim.app.service_names[2], 4)
    sim.restart(sim.app.service_names[3])
    sim.advance_to(900)
    assert _assert_state_columns(sim, seen) > 10_000


def test_a_state_run_rewritten_from_a_refresh_behind_its_written_ticks(monkeypatch, numba_mode):
    """A refresh at a tick the family's current run was already written past starts the new run there: its values
    replace the old ones from that tick on (the definition's columns), as a run closed at its start would."""
    seen = _state_by_tick(monkeypatch)
    behind = []
    close = MetricWriter._close

    def counted(self, name, dirty):
        run = self._runs.get(name)
        if run is not None and run[1] > self._at:
            behind.append(name)
        return close(self, name, dirty)

    monkeypatch.setattr(MetricWriter, "_close", counted)
    sim = SimBackend("online-boutique", seed=3)
    sim.advance_to(300)
    sim.store.complete()
    sim.writer.flush(sim.store.n_ticks + 3)   # written three ticks ahead
    sim.restart(sim.app.service_names[1])
    sim.advance_to(600)
    assert len(behind) >= 3
    assert _assert_state_columns(sim, seen) > 10_000


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
