"""The twin's speed caches answer what their uncached definitions answer, through faults, OOM kills and
interventions that create, delete, reschedule and crash pods: the active-pod list, the bound-pod mask, the
flow slots and their cAdvisor rows (with and without metrics), the state families' current values, the
stacked inputs of deferred traffic and the Deployment conditions given a counted availability."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.traffic import StackedInputs


def _uncached_active(c) -> list:
    return [p for dep in c.deployments.values() for rs in dep.rss for p in rs.pods]


def _check(sim: SimBackend) -> None:
    c = sim.cluster
    active = c.active_pods()
    assert [id(p) for p in active] == [id(p) for p in _uncached_active(c)]
    active.clear()                                     # callers get a copy: the cache is not theirs
    assert len(c.active_pods()) == len(_uncached_active(c))
    n = len(c.pods)
    assert c.p_bound[:n].tolist() == [p.node >= 0 for p in c.pods]
    slots = sim.writer.flow_slots_now()
    assert slots.tolist() == [p.slot for p in c.pods if not p.deleted and p.node >= 0]
    if sim.metrics:
        w = sim.writer
        for slot, row in zip(slots.tolist(), w.flow_rows.tolist()):
            p = c.pods[slot]
            lv = (w.ns, p.name, c.svc_names[p.svc], c.nodes[p.node].name)
            assert all(fam._index[lv] == row for fam in (w.cpu, w.periods, w.throttled, w.mem))
        # state families: the kept values are exactly the live entries of the objects' series
        live = {name: set() for name in w._cur}
        for _, entries, *_ in w._objects.values():
            for (name, row), value in entries.items():
                vals, is_live = w._cur[name][:2]
                assert is_live[row] and (vals[row] == value or (np.isnan(vals[row]) and np.isnan(value)))
                live[name].add(row)
        for name, (vals, is_live, *_) in w._cur.items():
            assert set(np.flatnonzero(is_live).tolist()) == live[name]
            assert np.isnan(vals[~is_live]).all()
    for dep in c.deployments.values():
        avail = sum(1 for p in dep.live_pods() if sim.pod_ready_eff[p.slot])
        conds = sim.deployment_conditions(dep)
        assert sim.deployment_conditions(dep, avail=avail) == conds
        if sim.metrics:   # the exported condition series carry deployment_conditions' statuses
            fam = sim.writer._fams["kube_deployment_status_condition"]
            entries = sim.writer._objects[("dep", dep.name)][1]
            for cond, (status, _, _) in conds.items():
                for s in ("true", "false", "unknown"):
                    row = fam._index[(sim.writer.ns, dep.name, cond, s)]
                    assert entries[("kube_deployment_status_condition", row)] == float(status.lower() == s)


def _drive(sim: SimBackend) -> int:
    checks = 0
    sim.advance_to(60)
    _check(sim)
    sim.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=10_000))   # OOM kills, restarts
    sim.scale("frontend", 4)
    unbound = [False]
    for t in (75, 90, 150):
        sim.advance_to(t)
        _check(sim)
        unbound[0] |= any(p.node < 0 and not p.deleted for p in sim.cluster.pods)
        checks += 1
    sim.restart("checkoutservice")
    for nd in sim.cluster.nodes:   # nowhere to schedule: evicted and new pods wait unbound
        sim.drain_node(nd.name)
    sim.deploy("currencyservice", message="m", author="a", image_tag="no-such-tag")
    for t in (165, 180, 240, 330):
        sim.advance_to(t)
        _check(sim)
        unbound[0] |= any(p.node < 0 and not p.deleted for p in sim.cluster.pods)
        checks += 1
    sim.scale("frontend", 1)
    for nd in sim.cluster.nodes:
        sim.uncordon_node(nd.name)
    sim.advance_to(420)
    _check(sim)
    c = sim.cluster
    assert sim.pod_ooms and any(p.deleted for p in c.pods) and unbound[0]
    assert len(c.pods) > len(c.active_pods()) and any(p.restarts for p in c.active_pods())
    return checks + 2


def test_caches_equal_their_definitions_with_metrics():
    assert _drive(SimBackend("online-boutique", seed=3)) == 9


def test_caches_equal_their_definitions_without_metrics():
    assert _drive(SimBackend("online-boutique", seed=3, metrics=False)) == 9


def test_stacked_inputs_repeat_each_runs_row():
    sim = SimBackend("online-boutique", seed=2)
    a = sim.inputs
    sim.apply_effect(Effect(kind="latency", service="cartservice", ms=50.0))
    sim.advance_to(30)
    b = sim.inputs
    assert a is not b
    sim.apply_effect(Effect(kind="cpu_burn", service="frontend", millicores=300))
    sim.scale("frontend", 3)
    sim.advance_to(90)
    c = sim.inputs
    assert c is not b and c is not a
    rng = np.random.default_rng(3)
    cases = [[(a, 2), (b, 1), (a, 3)], [(c, 1)]]
    cases += [[(x, int(rng.integers(1, 5))) for x in rng.choice([a, b, c], size=int(rng.integers(1, 7)))]
              for _ in range(20)]
    for runs in cases:
        st = StackedInputs(runs)
        for name in StackedInputs.FIELDS:   # the definition: each field's rows stacked and repeated (bit for bit)
            want = np.concatenate([np.broadcast_to(getattr(inp, name), (k,) + getattr(inp, name).shape)
                                   for inp, k in runs])
            got = getattr(st, name)
            assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes(), name
            assert got.flags.c_contiguous, name


def test_bootstrap_revision_hashes_are_their_templates_hashes():
    """The bootstrap ReplicaSets' hashes, made once per app model (`cluster._base_hashes`), are their
    templates' `template_hash` (the definition), for a second cluster of the app and for another model."""
    from apps import load_app
    from sremarathon_env.backends.sim import cluster as cluster_mod
    from sremarathon_env.backends.sim.util import template_hash

    for name in ("online-boutique", "train-ticket"):
        app = load_app(name)
        for seed in (1, 2):
            c = cluster_mod.Cluster(app, seed)
            c.bootstrap(lambda pod, t: None)
            assert [rs.hash for rs in c.rs_by_id] == [template_hash(rs.template) for rs in c.rs_by_id]
            assert len(c.rs_by_id) == len(app.services)
        first = app.services[0].model_copy(update={"tag": app.services[0].tag + "-x"})   # (models are frozen)
        other = app.model_copy(update={"services": [first, *app.services[1:]]})
        c = cluster_mod.Cluster(other, 1)
        c.bootstrap(lambda pod, t: None)
        assert c.rs_by_id[0].hash == template_hash(c.rs_by_id[0].template) != cluster_mod._base_hashes(app)[0]


def test_zone_latency_and_effect_masks_equal_their_definitions(monkeypatch):
    """The per-edge network latency is kept by the ready pods' counts per (service, zone) (`_zone_net`), and the
    resolution's call-node masks per edge and per service are kept per compiled app: reference runs of every app
    give the same evidence, inputs and resolutions as with both made afresh at every input rebuild, and each kept
    latency equals the one made from the current ready pods."""
    from sremarathon_env import marathon as M
    from sremarathon_env.backends.sim import backend as backend_mod, faulthook

    seen = {"builds": 0, "kept": 0}
    build = backend_mod.SimBackend._build_inputs

    def record(self, T, n, cap):
        before = len(self._zone_net)
        build(self, T, n, cap)
        seen["builds"] += 1
        seen["kept"] += len(self._zone_net) == before
        # the definition: the zone mix of the ready pods now
        c, m = self.cluster, self.m
        ready = np.flatnonzero(self.pod_ready_eff[:n])
        Zm = np.zeros((m.S, m.Z))
        np.add.at(Zm, (c.p_svc[ready], m.node_zone[c.p_node[ready]]), 1.0)
        empty = np.flatnonzero(Zm.sum(axis=1) == 0)
        Zm[empty, self._spec_zone[empty]] = 1.0
        Zm /= Zm.sum(axis=1, keepdims=True)
        same = np.einsum("ez,ez->e", Zm[np.maximum(m.edge_caller, 0)], Zm[m.edge_callee])
        topo = self.app.topology
        want = topo.intra_zone_latency_ms + (1.0 - same) * (topo.inter_zone_latency_ms - topo.intra_zone_latency_ms)
        want[0] = 0.0
        assert self.inputs.net_ms.tobytes() == (want[m.node_edge] + self.res.net_add).tobytes()

    def runs():
        out = []
        for app in ("online-boutique", "train-ticket", "astronomy-shop"):
            backend_mod._TAPES.clear()
            out.append(M.reference_evidence.__wrapped__(M.MarathonConfig(app=app, seed=3, injection_s=1800,
                                                                         observation_s=300)))
        return out

    monkeypatch.setattr(backend_mod.SimBackend, "_build_inputs", record)
    kept = runs()
    assert seen["builds"] > 150 and seen["kept"] > seen["builds"] // 2

    def afresh(self, T, n, cap):   # the definitions: nothing kept
        self._zone_net.clear()
        self.m.__dict__.pop("_mask_cache", None)
        self.m.__dict__.pop("_edge_mask_cache", None)
        build(self, T, n, cap)

    monkeypatch.setattr(backend_mod.SimBackend, "_build_inputs", afresh)
    assert runs() == kept
    m = SimBackend("train-ticket", seed=1).m
    for e in range(m.E):
        mask = faulthook._mask_edge(type("S", (), {"m": m})(), e)
        assert not mask.flags.writeable and mask.tolist() == (m.node_edge == e).tolist()


def test_inputs_equal_to_the_current_ones_are_the_current_ones(monkeypatch):
    """A state refresh whose traffic inputs come out bit for bit the current ones keeps the current (prepared)
    inputs object and its no-endpoint shares: the same history, evidence and store as building new inputs at
    every refresh (the definition), through churn, OOM kills, drains, faults and node loss."""
    from sremarathon_env.backends.sim import backend as backend_mod
    from tests.backends.sim.twins import assert_same_twins

    seen = {"builds": 0, "kept": 0}
    build = backend_mod.SimBackend._build_inputs

    def counted(self, T, n, cap):
        before = getattr(self, "inputs", None)
        build(self, T, n, cap)
        seen["builds"] += 1
        if self.inputs is before:
            seen["kept"] += 1
            want = (self.ready_count, self.inputs.capacity, self.inputs.burn, self.res.lat_add, self.res.e_app,
                    self.res.e_unreach, self.inputs.net_ms, self.res.no_endpoints)
            assert self.inputs._raw == backend_mod._raw_inputs_key(*want)
            assert self.ready_count is self.inputs.ready

    def run(fresh: bool):
        if fresh:   # the definition: new inputs at every build
            monkeypatch.setattr(backend_mod, "_raw_inputs_key", lambda *arrays: object())
        sim = SimBackend("online-boutique", seed=3)
        evidence = []
        advance = sim.advance_to
        sim.advance_to = lambda t: evidence.extend(advance(t)) or []
        _drive(sim)
        t = 420
        for svc in ("frontend", "cartservice", "adservice", "currencyservice"):   # new pods beside serving ones
            sim.restart(svc)
            t += 60
            sim.advance_to(t)
        sim.apply_effect(Effect(kind="error_rate", service="cartservice", rate=0.4))
        sim.apply_effect(Effect(kind="node_down", node=sim.cluster.nodes[0].name))
        sim.restart("frontend")
        sim.advance_to(t + 300)
        del sim.advance_to
        monkeypatch.undo()
        return sim, evidence

    monkeypatch.setattr(backend_mod.SimBackend, "_build_inputs", counted)
    fast, ev_fast = run(False)
    assert seen["kept"] > 3 and seen["builds"] > seen["kept"]
    plain, ev_plain = run(True)
    assert ev_fast == ev_plain and len(ev_fast) > 40
    assert_same_twins(fast, plain)
