"""The metric writer's fast paths equal their definitions at every call of runs with new response codes,
restarts, scaling, OOM kills, drains and node loss:

- the request series' flat positions and rows, kept as each series is enabled (`MetricWriter._rebuild_req`),
  against the lookup by labels (`_rebuild_req_slow`);
- a pod's and a Deployment's series, made as (family, labels) and values lists (`_pod_keys` /
  `_pod_values`, `_dep_keys` / `_dep_values`) with the readiness read from a list made once per refresh,
  against the generators as first written (readiness read from the live numpy array);
- the values alone derived when the shape (`_pod_shape`, `_dep_shape`) is unchanged: the series are then
  the kept ones;
- the rows a state run is written to (first to last live row) against argmax;

and a whole run writes the same store, bit for bit, with the label lookup in place of the kept rows."""

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.cluster import rolling_params
from sremarathon_env.backends.sim.metrics import MI, MetricWriter

from tests.backends.sim.test_twin_caches import _drive


def _pod_series_plain(w: MetricWriter, p):
    sim = w.sim
    c = sim.cluster
    ns = w.ns
    svc = c.svc_names[p.svc]
    node = c.nodes[p.node].name if p.node >= 0 else ""
    host_ip = sim.node_ip(p.node) if p.node >= 0 else ""
    rs = p.rs.name
    yield "kube_pod_info", (ns, p.name, node, "ReplicaSet", rs, host_ip), 1.0
    yield "kube_pod_owner", (ns, p.name, "ReplicaSet", rs), 1.0
    yield "kube_pod_labels", (ns, p.name, svc), 1.0
    for ph in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
        yield "kube_pod_status_phase", (ns, p.name, ph), float(p.phase == ph)
    rdy = bool(sim.pod_ready_eff[p.slot])
    unknown = p.node_lost
    for cond, v in (("true", rdy and not unknown), ("false", not rdy and not unknown), ("unknown", unknown)):
        yield "kube_pod_status_ready", (ns, p.name, cond), float(v)
    yield "kube_pod_container_status_ready", (ns, p.name, svc), float(rdy)
    yield "kube_pod_container_status_running", (ns, p.name, svc), float(p.cstate == "running")
    yield "kube_pod_container_status_waiting", (ns, p.name, svc), float(p.cstate == "waiting")
    if p.cstate == "waiting" and p.reason:
        yield "kube_pod_container_status_waiting_reason", (ns, p.name, svc, p.reason), 1.0
    yield "kube_pod_container_status_restarts_total", (ns, p.name, svc), float(p.restarts)
    if p.last_reason:
        yield "kube_pod_container_status_last_terminated_reason", (ns, p.name, svc, p.last_reason), 1.0
    if p.node >= 0:
        res = p.rs.template["resources"]
        for key, fam_name, resource, unit, scale in (
                ("cpu_request_m", "kube_pod_container_resource_requests", "cpu", "core", 1e-3),
                ("mem_request_mi", "kube_pod_container_resource_requests", "memory", "byte", MI),
                ("cpu_limit_m", "kube_pod_container_resource_limits", "cpu", "core", 1e-3),
                ("mem_limit_mi", "kube_pod_container_resource_limits", "memory", "byte", MI)):
            if res.get(key):
                yield fam_name, (ns, p.name, svc, node, resource, unit), res[key] * scale
        yield "container_oom_events_total", (ns, p.name, svc, node), float(sim.pod_ooms.get(p.slot, 0))
    yield "up", ("kubernetes-pods", ns, p.name, svc), float(p.cstate == "running" and not p.node_lost)


def _dep_series_plain(w: MetricWriter, dep):
    sim = w.sim
    ns = w.ns
    ready_eff = sim.pod_ready_eff
    d = dep.name
    live = dep.live_pods()
    ready_of = [bool(ready_eff[p.slot]) for p in live]
    avail = sum(ready_of)
    yield "kube_deployment_spec_replicas", (ns, d), float(dep.replicas)
    yield "kube_deployment_status_replicas", (ns, d), float(len(live))
    yield "kube_deployment_status_replicas_available", (ns, d), float(avail)
    yield "kube_deployment_status_replicas_unavailable", (ns, d), float(max(0, dep.replicas - avail) if live or dep.replicas else 0)
    yield "kube_deployment_status_replicas_updated", (ns, d), float(len(dep.current.pods))
    _, unavail = rolling_params(dep.replicas)
    for cond, st in (("Available", "true" if avail >= dep.replicas - unavail else "false"),
                     ("Progressing", "false" if dep.progress_failed else "true")):
        for s in ("true", "false", "unknown"):
            yield "kube_deployment_status_condition", (ns, d, cond, s), float(st == s)
    yield "kube_deployment_metadata_generation", (ns, d), float(dep.generation)
    yield "kube_deployment_status_observed_generation", (ns, d), float(dep.observed_generation)
    for rs in dep.rss:
        yield "kube_replicaset_status_ready_replicas", (ns, rs.name), float(sum(1 for p in rs.pods if ready_eff[p.slot]))
    n_ready = n_not = 0
    if not sim.res.no_endpoints[dep.svc]:
        for p, r in zip(live, ready_of):
            if p.node < 0 or p.cstate == "waiting" and p.reason in ("ContainerCreating", "ErrImagePull", "ImagePullBackOff"):
                continue
            if r:
                n_ready += 1
            else:
                n_not += 1
    yield "kube_endpoint_address_available", (ns, d), float(n_ready)
    yield "kube_endpoint_address_not_ready", (ns, d), float(n_not)


def _same_items(got: list, want: list) -> None:
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert [(type(g[2]), g[2]) for g in got] == [(type(w[2]), w[2]) for w in want]


def _run(app: str, seed: int) -> SimBackend:
    sim = SimBackend(app, seed=seed)
    sim.advance_to(60)
    svc = sim.app.services[1].name
    h = sim.apply_effect(Effect(kind="error_rate", service=svc, rate=0.5))   # new 500s on its callers' edges
    sim.advance_to(150)
    sim.remove_effect(h)
    node = sim.cluster.nodes[sim.cluster.pods[0].node].name
    sim.apply_effect(Effect(kind="node_down", node=node))                   # lost pods, evicted, rescheduled
    sim.restart(svc)
    front = sim.app.services[0].name
    sim.scale(front, 4)
    sim.advance_to(400)
    sim.scale(front, 1)
    sim.advance_to(600)
    return sim


def _store_bytes(sim: SimBackend) -> list:
    st = sim.store
    return [(f.name, f.label_names, list(f._label_values), np.ascontiguousarray(f.values(st.n_ticks)).tobytes())
            for f in st._order]


@pytest.fixture
def checked(monkeypatch):
    calls = {"req": 0, "pod": 0, "dep": 0, "values": 0, "runs": 0, "ranges": 0, "quota": 0}
    rebuild, update, refresh = MetricWriter._rebuild_req, MetricWriter._update, MetricWriter.refresh_state

    def rebuild_checked(self):
        rebuild(self)
        flat, rows = self._rebuild_req_slow()
        assert self.req_flat.dtype == flat.dtype and self.req_rows.dtype == rows.dtype
        assert self.req_flat.tolist() == flat.tolist() and self.req_rows.tolist() == rows.tolist()
        calls["req"] += 1

    def update_checked(self, key, sig, series, dirty, shape=None, values=None):
        old = self._objects.get(key)
        if key[0] in ("pod", "dep") and (old is None or old[0] != sig):
            if key[0] == "pod":
                obj = self.sim.cluster.pods[key[1]]
                plain, mine, shape_of = _pod_series_plain(self, obj), self._pod_series(obj), self._pod_shape
            else:
                obj = self.sim.cluster.deployments[key[1]]
                plain, mine, shape_of = _dep_series_plain(self, obj), self._dep_series(obj), self._dep_shape
            want = list(plain)
            _same_items(mine, want)
            keys, vals = series()
            _same_items([k + (v,) for k, v in zip(keys, vals)], want)
            assert shape == shape_of(obj)
            if old is not None and old[2] is not None and old[5] == shape:   # the values alone, the kept series
                assert old[2] == [w[:2] for w in want] and values() == [w[2] for w in want]
                calls["values"] += 1
            calls[key[0]] += 1
        if key[0] == "quota" and (old is None or old[0] != sig):   # the values alone, in the series' order
            keys, vals = series()
            assert shape == MetricWriter._QUOTA_SHAPE and values() == vals
            calls["quota"] += 1
        return update(self, key, sig, series, dirty, shape, values)

    def refresh_checked(self, tick):
        refresh(self, tick)
        for name, (vals, live, lo, hi) in self._cur.items():   # a kept live range is the first and last live row
            if lo is not None:
                on = np.flatnonzero(live)
                assert (lo, hi) == ((int(on[0]), int(on[-1]) + 1) if len(on) else (0, 0)), name
                calls["ranges"] += 1

    def write_checked(self, name, run, upto, ks=None):   # a run written: the rows it took are the first to last live row
        write_run(self, name, run, upto, ks)
        vals, live, r0, r1 = self._cur[name]
        if live.any():   # the definition: first and last live row by argmax
            assert (r0, r1) == (int(live.argmax()), len(live) - int(live[::-1].argmax()))
        else:
            assert r0 == r1 == 0
        assert run[1] == upto
        calls["runs"] += 1

    write_run = MetricWriter._write_run
    monkeypatch.setattr(MetricWriter, "_write_run", write_checked)
    monkeypatch.setattr(MetricWriter, "_rebuild_req", rebuild_checked)
    monkeypatch.setattr(MetricWriter, "_update", update_checked)
    monkeypatch.setattr(MetricWriter, "refresh_state", refresh_checked)
    return calls


@pytest.mark.parametrize("app", ["online-boutique", "astronomy-shop"])
def test_writer_fast_paths_equal_their_definitions(checked, app):
    sim = _run(app, 2)
    assert checked["req"] >= 2 and checked["pod"] > 20 and checked["dep"] >= 20 and checked["runs"] > 100
    assert checked["values"] > 5 and checked["ranges"] > 100
    assert len(sim.writer.req_rows) > len(sim.writer.mesh_edges)   # series beyond the first ones appeared


def test_writer_fast_paths_through_churn_and_drains(checked):
    _drive(SimBackend("online-boutique", seed=3))
    assert checked["pod"] > 50 and checked["values"] > 20 and checked["runs"] > 100 and checked["quota"] >= 3


def test_a_run_writes_what_the_definitions_write(monkeypatch):
    """The kept request rows, the series lists and the values-only path, against the label lookup and the
    series as first written (every update through them), over a whole Train Ticket run."""
    fast = _store_bytes(_run("train-ticket", 4))

    def rebuild_slow(self):
        self.req_flat, self.req_rows = self._rebuild_req_slow()

    def update_plain(self, key, sig, series, dirty, shape=None, values=None):
        if key[0] == "pod":
            obj = self.sim.cluster.pods[key[1]]
            series = lambda: self._split(_pod_series_plain(self, obj))   # noqa: E731
        elif key[0] == "dep":
            obj = self.sim.cluster.deployments[key[1]]
            series = lambda: self._split(_dep_series_plain(self, obj))   # noqa: E731
        return update(self, key, sig, series, dirty)

    update = MetricWriter._update
    monkeypatch.setattr(MetricWriter, "_rebuild_req", rebuild_slow)
    monkeypatch.setattr(MetricWriter, "_update", update_plain)
    slow = _store_bytes(_run("train-ticket", 4))
    assert [x[:3] for x in fast] == [x[:3] for x in slow]
    assert [x[3] for x in fast] == [x[3] for x in slow]


@pytest.mark.parametrize("app", ["train-ticket", "online-boutique"])
def test_visiting_only_the_changed_deployments_writes_what_visiting_all_does(monkeypatch, app):
    """Once every Deployment has its series, a state refresh visits only those the cluster touched or whose
    pods changed (in the cluster's order); the definition visits every Deployment and skips the others.
    Same Deployment updates and the same store bit for bit, through node loss, restarts, scaling and churn."""
    refresh, update = MetricWriter.refresh_state, MetricWriter._update
    visits, selected = [], [0]

    def counted(self, key, *a, **k):
        if key[0] == "dep":
            visits[-1] += 1
        return update(self, key, *a, **k)

    def every_deployment(self, tick):   # the definition: the first refresh's full pass, every time
        self._dep_rank = None
        return refresh(self, tick)

    def fast(self, tick):
        selected[0] += self._dep_rank is not None
        return refresh(self, tick)

    monkeypatch.setattr(MetricWriter, "_update", counted)
    runs = {}
    for name, patch in (("fast", fast), ("all", every_deployment)):
        monkeypatch.setattr(MetricWriter, "refresh_state", patch)
        visits.append(0)
        if app == "online-boutique":   # churn, drains, OOM kills
            sim = SimBackend(app, seed=3)
            _drive(sim)
        else:
            sim = _run(app, 4)
        runs[name] = _store_bytes(sim)
    assert [x[:3] for x in runs["fast"]] == [x[:3] for x in runs["all"]]
    assert [x[3] for x in runs["fast"]] == [x[3] for x in runs["all"]]
    assert visits[0] == visits[1] > 20 and selected[0] > 3, (visits, selected)


def test_deployments_skipped_by_their_values_hold_the_definitions_series(monkeypatch):
    """A state refresh leaves a Deployment as it is when its head (replicas, generations, progress, endpoints,
    ReplicaSets) and its values (`_dep_values`) are the last ones. After every refresh, every Deployment's kept
    series and values are the definition's (`_dep_series_plain`), through rollouts, node loss, OOM kills, restarts
    and scaling; some refreshes do leave Deployments whose pods changed as they were."""
    refresh, update = MetricWriter.refresh_state, MetricWriter._update
    seen = {"checked": 0, "kept": 0}

    def counted(self, key, sig, *a, **k):
        old = self._objects.get(key)
        seen["kept"] += key[0] == "dep" and old is not None and old[0] == sig
        return update(self, key, sig, *a, **k)

    def refresh_checked(self, tick):
        refresh(self, tick)
        for dep in self.sim.cluster.deployments.values():
            sig, entries, keys, rows, vals, shape = self._objects[("dep", dep.name)]
            want = list(_dep_series_plain(self, dep))
            assert keys == [w[:2] for w in want] and vals == [w[2] for w in want], dep.name
            assert list(entries.values()) == vals and sig[1] == vals
            seen["checked"] += 1

    monkeypatch.setattr(MetricWriter, "_update", counted)
    monkeypatch.setattr(MetricWriter, "refresh_state", refresh_checked)
    _drive(SimBackend("online-boutique", seed=3))
    _run("train-ticket", 4)
    assert seen["checked"] > 400 and seen["kept"] > 5, seen
