"""The twin's fast paths give what their plain definitions give, at every call of a run with pod churn,
OOM kills, drains, node loss and rescheduling: the scheduler's node choice (per-node request sums from the
pods grouped by node), the quota's use (active slots kept per layout version, nansum in place) and check (no
sum far from the limits), the per-service memory utilisation (largest ratio without NaN), the seeded
generators (entropy words as one uint32 array)."""

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.cluster import Cluster
from sremarathon_env.backends.sim.util import child_rng, key_ints

from tests.backends.sim.test_twin_caches import _drive
from tests.backends.sim.twins import assert_same_twins


def _pick_node_plain(c: Cluster, pod) -> int | None:
    """The scheduler's choice as first written: a mask and two sums per node."""
    spec = c.app.services[pod.svc]
    res = pod.rs.template["resources"]
    need_cpu = (res.get("cpu_request_m") or res.get("cpu_limit_m") or 0) / 1000.0
    need_mem = float(res.get("mem_request_mi") or res.get("mem_limit_mi") or 0)
    n_all = len(c.pods)
    act = c.p_active[:n_all] & c.p_bound[:n_all]
    if pod.slot < n_all:
        act[pod.slot] = False
    nodes_of = c.p_node[:n_all]
    mine = act & (c.p_rs[:n_all] == pod.rs.id)
    names = sorted({n.zone for n in c.nodes})
    zone_of = np.array([names.index(n.zone) for n in c.nodes], dtype=np.intp)[nodes_of]
    pref_zone = next((n.zone for n in c.nodes if n.name == spec.node), None)
    cpu_req = np.where(np.isnan(c.p_cpu_req[:n_all]), 0.0, c.p_cpu_req[:n_all])
    mem_req = np.where(np.isnan(c.p_mem_req[:n_all]), 0.0, c.p_mem_req[:n_all])
    same_node = np.bincount(nodes_of[mine], minlength=len(c.nodes)).tolist()
    same_zone = np.bincount(zone_of[mine], minlength=len(names)).tolist()
    best = None
    for n in c.nodes:
        if not n.ready or n.cordoned:
            continue
        on = act & (nodes_of == n.index)
        used_cpu = float(np.sum(cpu_req[on]))
        used_mem = float(np.sum(mem_req[on]))
        if used_cpu + need_cpu > n.cpu_m / 1000.0 or used_mem + need_mem > n.mem_mi:
            continue
        score = (same_node[n.index], 0 if n.name == spec.node else 1, same_zone[names.index(n.zone)],
                 0 if n.zone == pref_zone else 1, used_cpu / (n.cpu_m / 1000.0), n.index)
        if best is None or score < best[0]:
            best = (score, n.index)
    return None if best is None else best[1]


def _quota_block_plain(c: Cluster, rs) -> str:
    """The quota check as first written: the active pods' requests summed at every pod to create."""
    pods = c.active_pods()
    n_pods = len(pods)
    used_cpu = float(np.nansum(c.p_cpu_req[[p.slot for p in pods]])) if pods else 0.0
    res = rs.template["resources"]
    if n_pods + 1 > c.quota_hard.get("pods", float("inf")):
        return (f'pods "{rs.name}-xxxxx" is forbidden: exceeded quota: {c.ns}-quota, requested: pods=1, '
                f'used: pods={n_pods}, limited: pods={int(c.quota_hard["pods"])}')
    need = (res.get("cpu_request_m") or 0) / 1000.0
    if used_cpu + need > c.quota_hard.get("requests.cpu", float("inf")):
        return (f'pods "{rs.name}-xxxxx" is forbidden: exceeded quota: {c.ns}-quota, requested: requests.cpu='
                f'{res.get("cpu_request_m")}m, used: requests.cpu={int(used_cpu * 1000)}m, '
                f'limited: requests.cpu={int(c.quota_hard["requests.cpu"] * 1000)}m')
    return ""


@pytest.fixture
def compared(monkeypatch):
    """Every call of the fast paths during a test is checked against the plain definitions."""
    calls = {"pick": 0, "quota": 0, "quota_used": 0, "block": 0, "blocked": 0, "mem_util": 0}
    pick, quota, quota_used = Cluster._pick_node, Cluster._quota_used, SimBackend.quota_used
    block, mem_util = Cluster._quota_block, SimBackend._mem_util

    def mem_util_checked(self, mem, running, sl):
        got = mem_util(self, mem, running, sl)
        want = self._mem_util_plain(mem, running, sl)
        assert got.tobytes() == want.tobytes()   # the same floats (and no -0.0 for a 0.0)
        calls["mem_util"] += 1
        return got

    def block_checked(self, rs):
        got = block(self, rs)
        assert got == _quota_block_plain(self, rs)
        assert self._n_active == len(self.active_pods())
        calls["block"] += 1
        calls["blocked"] += bool(got)
        return got

    def pick_checked(self, pod):
        got = pick(self, pod)
        assert got == _pick_node_plain(self, pod)
        # and for every other active pod, as if it were placed now
        for p in self.active_pods()[:8]:
            assert pick(self, p) == _pick_node_plain(self, p)
        calls["pick"] += 1
        return got

    def quota_checked(self):
        got = quota(self)
        pods = self.active_pods()
        assert self.active_slots().tolist() == [p.slot for p in pods]
        want = float(np.nansum(self.p_cpu_req[[p.slot for p in pods]])) if pods else 0.0
        assert got == (len(pods), want)
        calls["quota"] += 1
        return got

    def quota_used_checked(self):
        got = quota_used(self)
        c = self.cluster
        slots = [p.slot for p in c.active_pods()]
        want = {"pods": float(len(slots)),
                "requests.cpu": float(np.nansum(c.p_cpu_req[slots])),
                "requests.memory": float(np.nansum(c.p_mem_req[slots])) * 2**20,
                "limits.cpu": float(np.nansum(c.p_cpu_lim[slots])),
                "limits.memory": float(np.nansum(c.p_mem_lim[slots])) * 2**20}
        assert got == want
        calls["quota_used"] += 1
        return got

    monkeypatch.setattr(Cluster, "_pick_node", pick_checked)
    monkeypatch.setattr(Cluster, "_quota_used", quota_checked)
    monkeypatch.setattr(Cluster, "_quota_block", block_checked)
    monkeypatch.setattr(SimBackend, "quota_used", quota_used_checked)
    def state_rows_checked(self, rows, mem, running, sl, lag_block):   # (with the compiled kernels, no _mem_util call)
        state_rows(self, rows, mem, running, sl, lag_block)
        assert rows[:, 5].tobytes() == self._mem_util_plain(mem, running, sl).tobytes()
        calls["mem_util"] += 1

    state_rows = SimBackend._state_rows
    monkeypatch.setattr(SimBackend, "_mem_util", mem_util_checked)
    monkeypatch.setattr(SimBackend, "_state_rows", state_rows_checked)
    return calls


@pytest.mark.parametrize("metrics", [True, False])
def test_fast_paths_through_churn_and_drains(compared, metrics):
    _drive(SimBackend("online-boutique", seed=3, metrics=metrics))
    assert compared["pick"] > 20 and compared["block"] > 20 and (compared["quota_used"] > 2 or not metrics)
    assert compared["mem_util"] > 20 or not metrics


def test_memory_utilisation_equals_its_definition_on_random_pods():
    """Random working sets, limits (some pods without one), running flags and services (some without pods,
    some whose pods all stopped or have no limit): the same floats as the NaN-skipping definition."""
    sim = SimBackend("online-boutique", seed=1, metrics=False)
    c = sim.cluster
    rng = np.random.default_rng(7)
    n = len(c.pods)
    for trial in range(40):
        sl = np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)).astype(np.intp)
        c.p_mem_lim[:n] = np.where(rng.random(n) < 0.3, np.nan, rng.uniform(64, 1024, n))
        c.p_svc[:n] = rng.integers(0, sim.m.S, n)
        c.layout_version += 1                      # (the grouping is kept per layout)
        sim._blk = None
        K = int(rng.integers(1, 5))
        running = rng.random((K, len(sl))) < 0.7
        mem = running * rng.uniform(0.0, 1500.0, (K, len(sl)))
        got = sim._mem_util(mem, running, sl)
        assert got.tobytes() == sim._mem_util_plain(mem, running, sl).tobytes(), trial


def test_quota_checks_near_and_over_the_limits(compared):
    """Close to the quota (pods and CPU requests) the check sums the requests: the same decisions and
    messages as the plain check, blocked creations included."""
    sim = SimBackend("online-boutique", seed=2)
    c = sim.cluster
    sim.advance_to(30)
    used = float(np.nansum(c.p_cpu_req[[p.slot for p in c.active_pods()]]))
    c.quota_hard["requests.cpu"] = used + 0.35            # room for a few more requests only
    sim.scale("frontend", 6)
    sim.advance_to(120)
    c.quota_hard["requests.cpu"] = float("inf")
    c.quota_hard["pods"] = float(len(c.active_pods()) + 2)   # two more pods, then blocked
    sim.scale("cartservice", 5)
    sim.restart("currencyservice")
    sim.advance_to(400)
    assert compared["blocked"] >= 2 and compared["block"] > compared["blocked"] and compared["quota"] >= 2


def test_fast_paths_through_node_loss(compared):
    sim = SimBackend("astronomy-shop", seed=1)
    sim.advance_to(60)
    node = sim.cluster.nodes[sim.cluster.pods[0].node].name
    h = sim.apply_effect(Effect(kind="node_down", node=node))
    sim.scale("frontend", 5)
    sim.advance_to(600)                      # evicted after 300 s, rescheduled elsewhere
    sim.remove_effect(h)
    sim.restart("cart")
    sim.advance_to(900)
    assert compared["pick"] > 5 and compared["block"] > 5 and compared["quota_used"] > 1


def test_child_rng_equals_the_seed_sequence_of_the_word_list():
    keys = [("kubelet", "frontend-6b7d9-x2x4z", 0, "start", 123.456), ("load", "jitter", 0), ("load", "phase"),
            ("kubelet", "", 3, "pull", 0.0), ()]
    for seed in (0, 1, 7, 2**31, 2**32 - 1, 2**32, 2**40 + 5, -1):
        for k in keys:
            got = child_rng(seed, *k)
            want = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & 0xFFFFFFFF,
                                                                               *key_ints(*k)])))
            assert got.bit_generator.state == want.bit_generator.state
            assert got.uniform(0.85, 1.25, 3).tolist() == want.uniform(0.85, 1.25, 3).tolist()


def _churn(sim: SimBackend) -> list:
    evidence = []
    for k in range(1, 41):
        evidence += sim.advance_to(k * 45.0)
        if k == 3:
            sim.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=10_000))   # OOM kills, restarts
        if k == 6:
            sim.scale("frontend", 4)
            sim.deploy("currencyservice", message="m", author="a", image_tag="v9.9.9")
        if k == 12:
            sim.apply_effect(Effect(kind="node_down", node=sim.cluster.nodes[1].name))
        if k == 20:
            sim.restart("checkoutservice")
            sim.apply_effect(Effect(kind="crash", service="adservice", reason="Error", exit_code=1))
    return evidence


def test_runs_under_the_same_inputs_step_as_one_run(monkeypatch):
    """A deferred step whose runs share their inputs steps them with one row of inputs: the numbers equal
    stepping a row per tick (forced here by giving every run its own copy of the inputs)."""
    import copy

    from sremarathon_env.backends.sim import backend as backend_mod

    monkeypatch.setattr(backend_mod, "_TAPES", {})
    stacked = []
    orig_stack = backend_mod.stack_inputs

    def stack(runs):
        stacked.append(len(runs))
        return orig_stack(runs)

    monkeypatch.setattr(backend_mod, "stack_inputs", stack)
    fast = SimBackend("online-boutique", seed=4)
    ev_fast = _churn(fast)
    n_fast = len(stacked)
    orig_queue = SimBackend._queue

    def queue(self, run):   # every run its own (equal) inputs and no-endpoint share
        run["inputs"] = copy.copy(run["inputs"])
        run["uh"] = run["uh"].copy()
        return orig_queue(self, run)

    monkeypatch.setattr(SimBackend, "_queue", queue)
    plain = SimBackend("online-boutique", seed=4)
    ev_plain = _churn(plain)
    assert len(stacked) - n_fast > n_fast + 5   # the plain twin stacked many more steps
    assert ev_fast == ev_plain
    assert_same_twins(fast, plain, history_nan=True)


def test_node_ips_are_kept_per_app():
    for app in ("online-boutique", "astronomy-shop"):
        sim = SimBackend(app, seed=0, metrics=False)
        for i in range(len(sim.cluster.nodes)):
            assert sim.node_ip(i) == f"10.0.{1 + sim.m.node_zone[i]}.{10 + i}"


def test_bulk_health_per_pod_fields_through_churn_and_node_loss(monkeypatch):
    """`services_health` sums restarts and takes the memory maximum over all pods at once: equal to the
    per-service reads after every advance and intervention of a churned run."""
    fields = ("mem_util", "restarts", "desired", "ready", "error_ratio")
    checked = [0]

    def check(sim):
        services = list(sim.app.service_names)
        want = np.array([[float(sim.service_health(s).get(f, 0.0)) for f in fields] for s in services])
        assert np.array_equal(sim.services_health(services, fields), want)
        checked[0] += 1

    orig_advance, orig_apply = SimBackend.advance_to, SimBackend.apply_effect

    def advance(self, t):
        out = orig_advance(self, t)
        check(self)
        return out

    def apply(self, e):
        h = orig_apply(self, e)
        check(self)
        return h

    monkeypatch.setattr(SimBackend, "advance_to", advance)
    monkeypatch.setattr(SimBackend, "apply_effect", apply)
    sim = SimBackend("online-boutique", seed=4)
    _churn(sim)
    assert checked[0] >= 43
    assert sim.services_health(["cartservice"], ("restarts",))[0, 0] > 0   # OOM kills counted


def test_a_new_revisions_hash_is_its_templates_hash():
    """A new revision gets the hash its lookup computed: the template's own hash, and rolling back to or
    re-deploying a template finds the revision that has it."""
    from sremarathon_env.backends.sim.util import template_hash

    sim = SimBackend("online-boutique", seed=1)
    sim.advance_to(30)
    sim.deploy("frontend", message="m", author="a", image_tag="v2")
    sim.restart("cartservice")
    sim.set_resources("adservice", cpu_limit_m=700)
    sim.set_config("frontend", "LOG_LEVEL", "debug")
    sim.advance_to(90)
    n_rs = len(sim.cluster.rs_by_id)
    sim.set_config("frontend", "LOG_LEVEL", None)   # back to an earlier template: no new revision
    sim.advance_to(120)
    assert len(sim.cluster.rs_by_id) == n_rs >= 11 + 4
    for rs in sim.cluster.rs_by_id:
        assert rs.hash == template_hash(rs.template)


def test_row_sums_of_a_stacked_array_are_the_1d_nansums():
    """`SimBackend.quota_used` sums four columns as the rows of one array: each row's sum is the float that
    ``np.nansum`` of the column alone gives (lengths across numpy's pairwise-summation blocks)."""
    rng = np.random.default_rng(0)
    for n in list(range(0, 40)) + [127, 128, 129, 255, 256, 257, 1000, 4099]:
        cols = rng.lognormal(3.0, 2.0, size=(4, n))
        cols[rng.random((4, n)) < 0.2] = np.nan
        x = cols.copy()
        x[np.isnan(x)] = 0.0
        assert x.sum(axis=1).tolist() == [float(np.nansum(c)) for c in cols], n


def test_restarted_containers_are_found_among_the_changed_slots(monkeypatch):
    """A refresh looks for (re)started containers among the slots the cluster synced since the last one and the
    slots just grown to (`SimBackend._restarted`): the same slots as comparing every slot (`_restarted_plain`), at
    every refresh of a churn run (OOM kills, restarts, drains, unbound pods) and of random-agent marathons."""
    seen = {"refreshes": 0, "restarts": 0, "grown": 0}
    restarted = SimBackend._restarted

    def checked(self, fresh):
        got = restarted(self, fresh)
        want = self._restarted_plain()
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
        seen["refreshes"] += 1
        seen["restarts"] += len(got)
        seen["grown"] += len(fresh) > 0
        return got

    monkeypatch.setattr(SimBackend, "_restarted", checked)
    _drive(SimBackend("online-boutique", seed=4))
    from baselines.runner import run_marathon
    for app in ("online-boutique", "train-ticket"):
        run_marathon(app, 3, "random", injection_s=1200, observation_s=300)
    assert seen["refreshes"] > 100 and seen["restarts"] > 50 and seen["grown"] > 3
