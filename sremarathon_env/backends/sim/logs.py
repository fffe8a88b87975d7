"""Lazily synthesised container logs, deterministic per (seed, service, tick).

Nothing is stored per line: `logs` walks the ticks of the asked range and renders each tick's lines
from the recorded history (request and failure shares per call, why an edge cannot reach its
callee, readiness) and from the pod lifecycle records (starts, exits with their last words), in the
service's language style: Go logrus JSON, Java Spring/log4j text, Node pino JSON, Python JSON
logging, .NET console, Redis... A tick's lines depend only on the seed, the service and the tick,
so the same query gives the same lines in any order of queries.

>>> from sremarathon_env.backends.sim import SimBackend
>>> sim = SimBackend("online-boutique", seed=1)
>>> _ = sim.scale("cartservice", 0)
>>> _ = sim.advance_to(120.0)
>>> any("cartservice" in l and "connection refused" in l for l in sim.logs("frontend", 0, 120, None, 50))
True
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

import numpy as np

from sremarathon_env.backends.sim import faulthook as fh
from sremarathon_env.backends.sim.util import EPOCH, child_rng, iso_ms

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

MAX_LINES_PER_TICK = 12


def _ts(t: float) -> str:
    return iso_ms(t)


def _fmt(lang: str, svc: str, pod: str, t: float, level: str, msg: str, logger: str = "") -> str:
    ts = _ts(t)
    if lang == "go":
        sev = {"ERROR": "error", "WARN": "warning", "INFO": "info", "FATAL": "fatal"}[level]
        return json.dumps({"message": msg, "severity": sev, "timestamp": ts}, separators=(",", ":"))
    if lang in ("nodejs", "typescript"):
        lv = {"ERROR": 50, "WARN": 40, "INFO": 30, "FATAL": 60}[level]
        ms = int(round(t * 1000)) + int(EPOCH.timestamp() * 1000)
        return json.dumps({"level": lv, "time": ms, "pid": 1, "hostname": pod, "name": f"{svc}-server", "msg": msg},
                          separators=(",", ":"))
    if lang == "python":
        return json.dumps({"timestamp": ts, "severity": level if level != "WARN" else "WARNING",
                           "name": f"{svc}-server", "message": msg}, separators=(",", ":"))
    if lang in ("java", "kotlin"):
        stamp = ts.replace("T", " ").rstrip("Z")
        return f"{stamp} {level:>5} 1 --- [nio-8080-exec-{1 + int(t * 7) % 10}] {logger or svc.replace('-', '.')} : {msg}"
    if lang == "csharp":
        lv = {"ERROR": "fail", "WARN": "warn", "INFO": "info", "FATAL": "crit"}[level]
        return f"{ts} {lv}: {logger or svc}[0] {msg}"
    if lang in ("redis", "valkey"):
        mark = {"ERROR": "#", "WARN": "#", "INFO": "*", "FATAL": "#"}[level]
        stamp = (EPOCH.replace(tzinfo=None)).strftime("%d %b %Y") + " " + ts[11:23]
        return f"1:M {stamp} {mark} {msg}"
    return f"{ts} {level} [{svc}] {msg}"


def _peer_error(lang: str, proto: str, callee: str, addr: str, op: str, cat: str, reason: int, deadline: float) -> str:
    """The error text a caller logs when a call to ``callee`` fails for ``cat``/``reason``."""
    host, _, port = addr.rpartition(":")
    ip = f"10.96.{sum(map(ord, callee)) % 4}.{10 + sum(map(ord, callee)) % 200}"
    if cat == "timeout":
        if lang in ("java", "kotlin"):
            return f"java.net.SocketTimeoutException: Read timed out (calling {callee} {op})"
        return (f"rpc error: code = DeadlineExceeded desc = context deadline exceeded (calling {callee}/{op}"
                f"{f', deadline {deadline:g}ms' if np.isfinite(deadline) else ''})")
    if cat == "app":
        if reason == fh.REASON_WRONG_TARGET:
            return f"rpc error: code = Unimplemented desc = unknown service for method {op} at {addr}"
        if lang in ("java", "kotlin") and proto == "http":
            return f'org.springframework.web.client.HttpServerErrorException$InternalServerError: 500 : from {callee} [{op}]'
        return f"rpc error: code = Internal desc = {callee}: {op} failed"
    # unreachable
    if reason == fh.REASON_NOHOST:
        if lang in ("java", "kotlin"):
            return f"java.net.UnknownHostException: {host or addr}: Name or service not known (calling {callee})"
        if lang in ("nodejs", "typescript"):
            return f"Error: getaddrinfo ENOTFOUND {host or addr} (calling {callee})"
        return (f'rpc error: code = Unavailable desc = name resolver error: produced zero addresses for {callee}: '
                f'dial tcp: lookup {host or addr} on 10.96.0.10:53: no such host')
    if reason == fh.REASON_NETWORK:
        if lang in ("java", "kotlin"):
            return f"java.net.SocketTimeoutException: connect timed out to {addr} (calling {callee})"
        return (f'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
                f'dial tcp {ip}:{port}: i/o timeout" (calling {callee})')
    if proto == "resp":
        return f"StackExchange.Redis.RedisConnectionException: It was not possible to connect to the redis server(s). UnableToConnect on {addr}: connection refused"
    if lang in ("java", "kotlin"):
        return (f'org.springframework.web.client.ResourceAccessException: I/O error on POST request for '
                f'"http://{addr}/{op}": Connection refused (calling {callee})')
    if lang in ("nodejs", "typescript"):
        return f"Error: 14 UNAVAILABLE: connect ECONNREFUSED {ip}:{port} (calling {callee})"
    if lang == "python":
        return (f"<_InactiveRpcError of RPC that terminated with: status = StatusCode.UNAVAILABLE details = "
                f'"failed to connect to all addresses; last error: UNKNOWN: ipv4:{ip}:{port}: Failed to connect to remote host: Connection refused" (calling {callee})>')
    return (f'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: '
            f'dial tcp {ip}:{port}: connect: connection refused" (calling {callee} at {addr})')


def _stack(lang: str, svc: str, head: str) -> list[str]:
    if lang == "go" and head.startswith(("panic", "fatal error")):
        return [head, "", "goroutine 1 [running]:", "main.mustMapEnv(...)" if "environment" in head else "main.main()",
                f"\t/src/{svc}/main.go:{88 + len(svc) % 40} +0x1c5", "main.main()", f"\t/src/{svc}/main.go:{120 + len(svc) % 30} +0x3a8"]
    if lang in ("java", "kotlin") and ("Exception" in head or "Error" in head):
        pkg = svc.replace("-", "")
        return [head, f"\tat {pkg}.Application.main(Application.java:{30 + len(svc)})",
                "\tat java.base/java.lang.Thread.run(Thread.java:833)"]
    return [head]


def _serving_intervals(sim: "SimBackend", svc: int) -> list[tuple[float, float, str]]:
    """(from, to, pod) while each pod of ``svc`` was ready, from the lifecycle records."""
    open_: dict[str, float] = {}
    out = []
    for p in sim.cluster.pods:
        if p.svc == svc and p.created_t < 0:
            open_[p.name] = p.created_t
    for (t, s, pod, what, _) in sim.cluster.lifecycle:
        if s != svc:
            continue
        if what == "ready":
            open_.setdefault(pod, t)
        elif what in ("exit", "stop") and pod in open_:
            out.append((open_.pop(pod), t, pod))
    out.extend((t, math.inf, pod) for pod, t in open_.items())
    return out


def _alive_pods(intervals: list[tuple[float, float, str]], t: float) -> list[str]:
    return sorted({pod for a, b, pod in intervals if a <= t < b})


def logs(sim: "SimBackend", service: str, since: float, until: float, pattern: str | None, limit: int) -> list[str]:
    m = sim.m
    s = m.svc_index.get(service)
    if s is None or limit is None or limit <= 0:
        return []
    spec = sim.app.services[s]
    lang = spec.language
    tick_s = sim.tick_s
    h = sim.history
    k_lo = max(0, int(math.ceil(since / tick_s - 1e-9)))
    k_hi = min(h.n - 1, int(math.floor(until / tick_s + 1e-9)))
    rx = None
    if pattern:
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error:
            rx = re.compile(re.escape(pattern), re.IGNORECASE)
    # per-edge static info for the caller
    out_nodes = np.flatnonzero(m.node_svc[np.maximum(m.node_parent, 0)] == s) if m.N else np.zeros(0, dtype=int)
    out_nodes = out_nodes[(m.node_parent[out_nodes] >= 0)]
    in_nodes = np.flatnonzero(m.node_svc == s)
    lifecycle = [r for r in sim.cluster.lifecycle if r[1] == s]
    sigs = [r for r in sim.sig_timeline if r[2] == s]
    port = spec.ports[0].target_port
    intervals = _serving_intervals(sim, s)
    result: list[str] = []
    # walk newest first so a small limit stops early; each tick is rendered independently
    for k in range(k_hi, k_lo - 1, -1):
        T = k * tick_s
        t0 = T - tick_s
        rng = child_rng(sim.seed, "logs", service, k)
        pods = _alive_pods(intervals, T) or [service]
        lines: list[tuple[float, str]] = []

        def emit(t: float, level: str, msg: str, pod: str | None = None, logger: str = "") -> None:
            pod = pod or pods[int(rng.integers(len(pods)))]
            lines.append((t, f"[{pod}] " + _fmt(lang, service, pod, t, level, msg, logger)))

        # lifecycle: starts and exits inside (t0, T]
        for (t, _, pod, what, detail) in lifecycle:
            if not (t0 < t <= T):
                continue
            if what == "start":
                emit(t + 0.2, "INFO", f"starting {service} server on port {port}", pod)
            elif what == "exit":
                reason, code, last = detail
                for j, line in enumerate(_stack(lang, service, last or f"exiting with code {code}")):
                    lines.append((t - 0.01 + j * 1e-4, f"[{pod}] {line}"))
        rate_in = h.node[0, k, in_nodes]
        served = float(rate_in.sum()) * tick_s
        if served > 0 and h.ready[k, s] > 0:
            for _ in range(min(2, 1 + int(rng.poisson(0.5)))):
                op = m.node_op[int(in_nodes[int(rng.integers(len(in_nodes)))])] if len(in_nodes) else "request"
                emit(t0 + float(rng.uniform(0, tick_s)), "INFO", f"request complete: {op} ({served / tick_s:.1f} req/s)")
            e_app = h.node[6, k, in_nodes]
            bad = float((rate_in * e_app).sum()) * tick_s
            if bad >= 0.5:
                for _ in range(min(4, 1 + int(bad // 25))):
                    emit(t0 + float(rng.uniform(0, tick_s)), "ERROR", f"error handling request: internal error ({service})")
        # outgoing calls that failed
        if len(out_nodes):
            rate = h.node[0, k, out_nodes]
            unreach = h.node[3, k, out_nodes]
            tout = h.node[4, k, out_nodes]
            app = np.maximum(h.node[2, k, out_nodes] - unreach - tout, 0.0)
            edges = m.node_edge[out_nodes]
            for e in sorted(set(int(x) for x in edges)):
                sel = edges == e
                callee = m.svc_names[m.edges[e][1]]
                spec_e = m.edge_specs[e]
                reason = int(h.reason[k, e])
                addr = f"{callee}:{sim.app.service(callee).ports[0].port}"
                for rec in sigs:
                    if rec[3].startswith(f"\x00addr:{callee}:") and rec[0] <= T < rec[1]:
                        addr = rec[3].split(":", 2)[2]
                ops = [m.node_op[int(n)] for n in out_nodes[sel]]
                for cat, arr in (("unreach", unreach), ("timeout", tout), ("app", app)):
                    n_fail = float((rate[sel] * arr[sel]).sum()) * tick_s
                    if n_fail < 0.5:
                        continue
                    level = "WARN" if spec_e is not None and spec_e.on_error != "fail" else "ERROR"
                    for _ in range(min(4, 1 + int(n_fail // 20))):
                        op = ops[int(rng.integers(len(ops)))]
                        err = _peer_error(lang, spec_e.protocol if spec_e else "http", callee, addr, op, cat, reason,
                                          spec_e.deadline_ms or np.inf if spec_e else np.inf)
                        verb = "failed to" if level == "ERROR" else "failed to (non-fatal)"
                        emit(t0 + float(rng.uniform(0, tick_s)), level, f"{verb} call {callee}.{op}: {err}")
        # active effect signatures
        for rec in sigs:
            if rec[3].startswith("\x00") or not (rec[0] <= T and rec[1] > t0):
                continue
            for _ in range(1 + int(rng.integers(2))):
                emit(t0 + float(rng.uniform(0, tick_s)), "ERROR" if "rror" in rec[3] or "xception" in rec[3] else "WARN",
                     rec[3])
        lines.sort(key=lambda x: x[0])
        lines = lines[-MAX_LINES_PER_TICK:] if len(lines) > 4 * MAX_LINES_PER_TICK else lines
        chunk = [ln for _, ln in lines if rx is None or rx.search(ln)]
        result[:0] = chunk
        if len(result) >= limit:
            break
    return result[-limit:]
