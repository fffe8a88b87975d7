"""The traffic step, with its gathers by ``take``, `add_children` and the in-place `norm_cdf`, gives the floats of
the step as first written (fancy indexing, ``+=`` through fancy indexes, the plain CDF and group sums), bit for
bit in every output: three apps, healthy and under faults that bring deadlines, shedding, unreachable callees,
added latency and errors into play, one tick and several, one row of inputs and one row per tick."""

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.traffic import (BASE_SIGMA, EPS, Z95, TickOutputs, stack_inputs)
from sremarathon_env.backends.sim.util import norm_cdf_plain


def _groups_plain(g, X):
    out = np.zeros(X.shape[:-1] + (g.n,))
    if len(g.order):
        cols = X[..., g.order]
        if g.weight is not None:
            cols = cols * g.weight
        out[..., g.present] = np.add.reduceat(cols, g.starts, axis=-1)
    return out


def _step_plain(self, task_rate, inp):
    """K ticks of traffic. ``inp`` holds one tick's inputs, or (K, ...) arrays of prepared inputs,
    one row per tick (see `stack_inputs`): every number is elementwise along the tick axis."""
    m = self.m
    if inp._x_fixed is None:
        self.prepare(inp)
    if task_rate.ndim < 2:
        task_rate = np.atleast_2d(task_rate)
    K = task_rate.shape[0]
    node_rate = task_rate[:, m.node_path] * m.node_mult
    svc_rate = _groups_plain(self._svc, node_rate)
    demand = svc_rate * self._cpu_s + inp.burn
    rho = np.where(inp._has_cap, demand / inp._cap, np.inf)
    q = np.where(rho < 0.95, 1.0 / (1.0 - np.minimum(rho, 0.95)), 20.0 * np.minimum(rho, 50.0))
    rho1 = np.minimum(rho, 1.0)
    sigma = (BASE_SIGMA + 0.4 * rho1 * rho1)[:, m.node_svc]
    LL = np.empty((2, K, m.N))          # [0]: latency, [1]: log of the success share
    lat, logs_ = LL[0], LL[1]
    np.add(inp._x_fixed, q[:, m.node_svc] * inp._x_q, out=lat)
    logs_[...] = inp._log_reach_app
    shed_any = rho > 1.0
    if shed_any.any():
        shed = np.where(shed_any, 1.0 - 1.0 / np.maximum(rho, 1.0), 0.0)
        logs_ += np.log(np.maximum(1.0 - shed[:, m.node_svc], EPS))
    timeout = np.zeros((K, m.N))
    lat_own = lat.copy()
    reach = inp._reach
    for idx, dl, dl_k, dl_K, W, starts, parents in self._levels:
        if len(dl):
            mean = lat[:, dl]
            s = sigma[:, dl]
            mu = np.log(np.maximum(mean, EPS)) - 0.5 * s * s
            # both CDFs in one elementwise pass (the same floats as two calls)
            both = norm_cdf_plain(np.concatenate([(mu - dl_k) / s, (mu + s * s - dl_k) / s], axis=1))
            nd = len(dl)
            p_over = both[:, :nd]
            overshoot = mean * both[:, nd:] - dl_K * p_over
            lat[:, dl] = mean - np.maximum(overshoot, 0.0)
            t_dl = p_over * reach[..., dl]   # (N,) inputs, or (K, N) per-tick inputs
            timeout[:, dl] = t_dl
            logs_[:, dl] += np.log(np.maximum(1.0 - t_dl, EPS))
        LL[:, :, parents] += np.add.reduceat(LL[:, :, idx] * W, starts, axis=2)
    fail = 1.0 - np.exp(logs_)
    own_fail = 1.0 - np.exp(inp._log_reach_app + np.log(np.maximum(1.0 - timeout, EPS)))
    P = m.P
    deg_ok = np.exp(_groups_plain(self._deg, np.log(np.maximum(1.0 - fail[:, self._deg_nodes], EPS))))
    path_fail = fail[:, :P]
    path_degraded = (1.0 - path_fail) * (1.0 - deg_ok)
    per_req = lat[:, :P] / self._root_rpt
    lat[:, :P] = per_req
    s_root = sigma[:, :P]
    med = per_req * np.exp(-0.5 * s_root * s_root)
    path_slow = 1.0 - norm_cdf_plain((self._log_slow - np.log(np.maximum(med, EPS))) / s_root)
    path_p95 = med * np.exp(Z95 * s_root)
    # edges
    unreach = inp._unreach
    stacked = np.empty((K, 10, m.N))    # the 10 per-call quantities summed per edge, written in place
    stacked[:, 0] = node_rate
    u_calls = np.multiply(node_rate, unreach, out=stacked[:, 1])
    reached_n = np.subtract(node_rate, u_calls, out=stacked[:, 6])
    np.multiply(node_rate, timeout, out=stacked[:, 2])
    np.multiply(node_rate, fail, out=stacked[:, 3])
    np.multiply(node_rate, lat, out=stacked[:, 4])
    np.multiply(reached_n, np.maximum(lat - inp.net_ms, 0.05), out=stacked[:, 5])
    np.multiply(node_rate, sigma, out=stacked[:, 7])
    np.multiply(node_rate, own_fail, out=stacked[:, 8])
    np.multiply(node_rate, lat_own, out=stacked[:, 9])
    agg = _groups_plain(self._edge, stacked)                                    # (K, 10, E)
    edge_rate, edge_unreach, edge_timeout, edge_fail = agg[:, 0], agg[:, 1], agg[:, 2], agg[:, 3]
    inv = 1.0 / np.maximum(edge_rate, EPS)
    edge_lat_src = agg[:, 4] * inv
    edge_lat_dst = agg[:, 5] / np.maximum(agg[:, 6], EPS)
    edge_sigma = np.where(edge_rate > 0, agg[:, 7] * inv, BASE_SIGMA)
    edge_app = np.maximum(edge_fail - edge_unreach - edge_timeout, 0.0)
    u_b = inp._unreach_1 if K == 1 and unreach.ndim == 1 else np.broadcast_to(unreach, (K, m.N))
    return TickOutputs(node_rate, lat, fail, u_b, timeout, sigma, svc_rate, rho,
                       demand, task_rate * self._root_rpt, path_fail, path_degraded, path_slow, per_req, med,
                       path_p95, edge_rate, edge_rate - edge_unreach, edge_fail, edge_unreach, edge_timeout,
                       edge_app, edge_lat_src, edge_lat_dst, edge_sigma, agg[:, 8], agg[:, 9] * inv)


def _faulted(app: str) -> tuple:
    """(a twin, its inputs healthy and then under faults on the app's first services, one after another)."""
    sim = SimBackend(app, seed=1)
    sim.advance_to(60)
    out = [sim.inputs]
    svc = [s.name for s in sim.app.services]
    for eff in (Effect(kind="latency", service=svc[1], ms=3000),        # deadlines expire
                Effect(kind="load_factor", factor=6.0),                 # saturation, shedding
                Effect(kind="error_rate", service=svc[2], rate=0.4)):
        sim.apply_effect(eff)
        sim.advance_to(sim.now + 30)
        out.append(sim.inputs)
    sim.scale(svc[3], 0)                                                # no endpoints: unreachable
    sim.advance_to(sim.now + 120)
    out.append(sim.inputs)
    return sim, out


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_step_equals_the_step_as_first_written(app):
    sim, inputs = _faulted(app)
    tm = sim.tm
    rng = np.random.default_rng(5)
    cases = []
    for inp in inputs:
        for K in (1, 3):
            cases.append((sim._task_rates(7, K) * rng.uniform(0.5, 4.0), inp))
    cases.append((sim._task_rates(11, 4), stack_inputs([(inputs[1], 1), (inputs[2], 2), (inputs[4], 1)])))
    for task_rate, inp in cases:
        got, want = tm.step(task_rate, inp), _step_plain(tm, task_rate, inp)
        for f in TickOutputs.__dataclass_fields__:
            a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
            assert a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64)), f
