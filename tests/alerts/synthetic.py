"""Synthetic metric stores for engine tests: counters with resets, gauges, histograms, gaps, staleness."""

from __future__ import annotations

import numpy as np

from sremarathon_env.telemetry.store import MetricStore

N_TICKS = 161  # 40 minutes at 15 s


def build_store(seed: int = 7, gaps: bool = False) -> MetricStore:
    rng = np.random.default_rng(seed)
    st = MetricStore(step_s=15.0, capacity=N_TICKS)
    n = N_TICKS
    req = st.family("http_requests_total", ("job", "instance", "code"))
    series = [("api", "a:80", "200"), ("api", "a:80", "500"), ("api", "b:80", "200"), ("api", "b:80", "500"),
              ("web", "c:80", "200"), ("web", "c:80", "503")]
    rows = req.rows(series)
    inc = rng.gamma(2.0, 3.0, size=(len(series), n)).round(2)
    inc[1] *= 0.05
    inc[3] *= 0.2
    vals = np.cumsum(inc, axis=1)
    # counter resets: restart from a small value
    for r, k in ((0, 50), (2, 90), (2, 120), (4, 30), (1, 131)):
        vals[r, k:] -= vals[r, k - 1] - rng.uniform(0, 2)
    vals[5, :] = np.cumsum(rng.integers(0, 3, size=n))  # integer counter, sometimes flat
    if gaps:
        vals[0, 60:70] = np.nan
        vals[3, 10:14] = np.nan
        vals[4, 100:150] = np.nan
    else:
        vals[3, 100:] = np.nan  # stops being written: stale
        vals[4, :40] = np.nan  # starts late
    for k in range(n):
        st.write(req, rows, k, vals[:, k])
    mem = st.family("mem_bytes", ("pod", "app"))
    mrows = mem.rows([("cart-7d9f8b6c5d-x2k4q", "cart"), ("cart-7d9f8b6c5d-p9zz2", "cart"),
                      ("frontend-5c6d7f8b9c-ab3cd", "frontend")])
    g = 1e8 + np.cumsum(rng.normal(0, 2e6, size=(3, n)), axis=1)
    g[2] = np.round(np.sin(np.arange(n) / 7.0) * 50 - 10, 3)
    if gaps:
        g[1, 20:23] = np.nan
    else:
        g[1, 130:] = np.nan
    for k in range(n):
        st.write(mem, mrows, k, g[:, k])
    info = st.family("pod_info", ("pod", "app", "node"))
    irows = info.rows([("cart-7d9f8b6c5d-x2k4q", "cart", "n1"), ("cart-7d9f8b6c5d-p9zz2", "cart", "n2"),
                       ("frontend-5c6d7f8b9c-ab3cd", "frontend", "n1")])
    for k in range(n):
        st.write(info, irows, k, np.ones(3))
    lim = st.family("mem_limit_bytes", ("app",))
    lrows = lim.rows([("cart",), ("frontend",)])
    for k in range(n):
        st.write(lim, lrows, k, np.array([1.2e8, 100.0]))
    bounds = ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"]
    hist = st.family("req_duration_seconds_bucket", ("svc", "le"))
    for svc, scale in (("api", 0.2), ("web", 0.8)):
        hrows = hist.rows([(svc, b) for b in bounds])
        obs = rng.exponential(scale, size=(n, 40))
        ub = np.array([float(b) for b in bounds])
        per_tick = (obs[:, :, None] <= ub[None, None, :]).sum(axis=1).astype(float)  # (n, buckets)
        cum = np.cumsum(per_tick, axis=0)
        for k in range(n):
            st.write(hist, hrows, k, cum[k])
    up = st.family("up", ("job", "instance"))
    urows = up.rows([("api", "a:80"), ("api", "b:80"), ("web", "c:80")])
    u = np.ones((3, n))
    u[1, 70:90] = 0
    for k in range(n):
        st.write(up, urows, k, u[:, k])
    return st


#: expressions covering every supported function and operator. Aggregations that fold more than two
#: non-dyadic floats are avoided: promtool 2.42 adds series in a random order (its loader iterates a
#: Go map), so its own last bit varies from run to run. ``exp`` is left out: Go's amd64 assembly
#: Exp differs from libm by one ulp on some inputs.
EXPRESSIONS = [
    'http_requests_total',
    'http_requests_total{code="500"}',
    'http_requests_total{code!="200"}',
    'http_requests_total{instance=~"a.*|c.*"}',
    'http_requests_total{instance!~"a.*", code=~"5.."}',
    '{__name__=~"mem_.*", app="cart"}',
    'http_requests_total offset 3m',
    'rate(http_requests_total[5m])',
    'rate(http_requests_total[1m])',
    'rate(http_requests_total[2m] offset 1m)',
    'irate(http_requests_total[5m])',
    'increase(http_requests_total[10m])',
    'delta(mem_bytes[5m])',
    'idelta(mem_bytes[3m])',
    'deriv(mem_bytes[10m])',
    'changes(http_requests_total{code="503"}[5m])',
    'resets(http_requests_total[15m])',
    'avg_over_time(mem_bytes[5m])',
    'min_over_time(mem_bytes[7m])',
    'max_over_time(mem_bytes[7m])',
    'sum_over_time(mem_bytes[5m])',
    'count_over_time(http_requests_total[3m])',
    'stddev_over_time(mem_bytes[10m])',
    'stdvar_over_time(mem_bytes[10m])',
    'quantile_over_time(0.9, mem_bytes[10m])',
    'last_over_time(mem_bytes[2m])',
    'present_over_time(http_requests_total[1m])',
    'histogram_quantile(0.95, rate(req_duration_seconds_bucket[5m]))',
    'histogram_quantile(0.5, sum by (le) (rate(req_duration_seconds_bucket[5m])))',
    'histogram_quantile(0.99, sum by (svc, le) (increase(req_duration_seconds_bucket[10m])))',
    'predict_linear(mem_bytes[10m], 3600)',
    'abs(mem_bytes{app="frontend"})',
    'clamp(mem_bytes, -20, 20)',
    'clamp_min(mem_bytes, 0)',
    'clamp_max(mem_bytes, 1e8)',
    'round(mem_bytes / 1e6, 0.5)',
    'ceil(mem_bytes / 3)', 'floor(mem_bytes / 3)', 'sqrt(abs(mem_bytes))', 'ln(abs(mem_bytes) + 1)',
    'log2(abs(mem_bytes) + 1)', 'log10(abs(mem_bytes) + 1)',
    'sgn(mem_bytes{app="frontend"})',
    'label_replace(mem_bytes, "service", "$1", "pod", "(.+)-[bcdfghjklmnpqrstvwxz2456789]{10}-[bcdfghjklmnpqrstvwxz2456789]{5}")',
    'label_replace(up, "host", "${1}_x", "instance", "([a-z]+):.*")',
    'absent(nonexistent_metric{job="x", code="1"})',
    'absent(up{job="api"})',
    'absent_over_time(http_requests_total{instance="b:80", code="500"}[1m])',
    'vector(time())',
    'scalar(sum(up))',
    'time()',
    'up * scalar(count(up))',
    'sum(rate(http_requests_total{job="web"}[5m]))',
    'sum(up)',
    'sum by (job, instance) (rate(http_requests_total[5m]))',
    'sum without (instance) (rate(http_requests_total[5m]))',
    'avg by (app) (mem_bytes)',
    'min by (code) (http_requests_total)',
    'max without (pod) (mem_bytes)',
    'count by (job) (up == 1)',
    'topk(2, rate(http_requests_total[5m]))',
    'bottomk(1, mem_bytes)',
    'topk by (job) (1, http_requests_total)',
    'quantile(0.75, rate(http_requests_total[5m]))',
    'quantile by (job) (0.3, http_requests_total)',
    'stddev by (job) (up * 4)',
    'stddev by (instance) (http_requests_total{job="web"} - http_requests_total{job="web"} + 2)',
    'stdvar by (job) (up)',
    'stdvar by (app) (mem_bytes{app="frontend"})',
    'group by (job) (up)',
    'sum by (instance) (rate(http_requests_total{code=~"5.."}[5m])) / sum by (instance) (rate(http_requests_total[5m]))',
    'rate(http_requests_total[5m]) > 1',
    'rate(http_requests_total[5m]) > bool 1',
    '2 < rate(http_requests_total[5m])',
    '1 >= bool up',
    'mem_bytes != 0',
    'mem_bytes == bool mem_bytes',
    'http_requests_total % 7',
    'mem_bytes{app="frontend"} ^ 2',
    '-mem_bytes',
    'up - 1',
    '3 - 2 * 4 / 2',
    '2 ^ 3 ^ 2',
    '7 % 3 + 1 >= bool 2',
    'mem_bytes / on(app) group_left mem_limit_bytes',
    'mem_bytes / on(pod) group_left(node) pod_info > 0.5',
    'mem_limit_bytes / on(app) group_right mem_bytes',
    'mem_bytes * on(pod) group_left(node) pod_info',
    'sum by (app) (mem_bytes) / ignoring(job) mem_limit_bytes',
    'up and on(instance) http_requests_total{code="200"}',
    'up or http_requests_total{code="500"}',
    'up unless on(job) http_requests_total{code="503"}',
    'http_requests_total{code="500"} unless ignoring(code) http_requests_total{code="200"} > 500',
    'max_over_time(rate(http_requests_total[2m])[10m:1m])',
    'avg_over_time(sum by (app) (mem_bytes)[5m:30s])',
    'min_over_time(up[10m:15s] offset 1m)',
    'rate(http_requests_total[5m:1m])',
    'sum by (job) (up offset 5m) + on(job) group_left count by (job) (up)',
]

EVAL_TIMES_S = [300.0, 457.5, 787.0, 1200.0, 1545.0, 1980.0, 2400.0, 2580.0]
