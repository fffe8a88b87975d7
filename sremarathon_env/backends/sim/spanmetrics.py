"""Span metrics of the messaging spans, as the OpenTelemetry collector's ``spanmetrics`` connector derives them.

A service mesh sees HTTP and gRPC calls, not what happens around a message broker: a producer that cannot
publish, or a consumer whose processing fails or slows down, leaves the mesh metrics untouched, and at a low
message rate the consumer lag stays small. Apps whose model sets ``span_metrics`` (the Astronomy Shop: the
OpenTelemetry demo runs the connector) also export, for every asynchronous messaging edge:

* the **producer** span at the caller of an edge into the broker (checkout's ``PublishOrders``): calls by status
  and a duration histogram (the publish alone: network and broker);
* the **consumer** span at the callee of an edge out of the broker (accounting's and fraud-detection's
  ``ConsumeOrders``): calls by status and a duration histogram (processing as the consumer sees it, its own
  database calls and network included). Only messages that reach a consumer have spans: while it has no
  ready pod, messages wait in the topic (consumer lag) instead of failing.

Families (`sremarathon_env.telemetry.catalogue`): ``traces_span_metrics_calls_total{namespace, service_name,
span_name, span_kind, status_code}`` (``STATUS_CODE_UNSET`` for spans without error, ``STATUS_CODE_ERROR``; the
error series appears with the first half error, as a counter does in Prometheus) and
``traces_span_metrics_duration_milliseconds_{bucket,sum,count}{namespace, service_name, span_name, span_kind}``
(every span, errors included) on the mesh's bucket bounds. HTTP and gRPC spans are left out: the mesh metrics already carry them.

>>> from sremarathon_env.backends.sim import SimBackend
>>> sim = SimBackend("astronomy-shop", seed=0)
>>> _ = sim.advance_to(300)
>>> [(s.service, s.span_name, s.kind) for s in sim.writer.spans.spans]
[('checkout', 'PublishOrders', 'SPAN_KIND_PRODUCER'), ('accounting', 'ConsumeOrders', 'SPAN_KIND_CONSUMER'), ('fraud-detection', 'ConsumeOrders', 'SPAN_KIND_CONSUMER')]
>>> sim.store.families("traces_span_metrics_calls_total")[0]._label_values[0]
('astronomy-shop', 'checkout', 'PublishOrders', 'SPAN_KIND_PRODUCER', 'STATUS_CODE_UNSET')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from sremarathon_env.backends.sim.traffic import bucket_cdf
from sremarathon_env.backends.sim.util import seqsum
from sremarathon_env.telemetry.catalogue import CATALOGUE, LE_LABELS

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

#: edge protocols whose spans the connector's metrics carry here (the mesh has HTTP and gRPC)
MESSAGING_PROTOCOLS = frozenset({"kafka"})
CALLS = "traces_span_metrics_calls_total"
DURATION = "traces_span_metrics_duration_milliseconds"
OK, ERROR = "STATUS_CODE_UNSET", "STATUS_CODE_ERROR"
PRODUCER, CONSUMER = "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"


class Span(NamedTuple):
    edge: int          #: the messaging edge the span belongs to
    service: str       #: the service that records it
    span_name: str     #: the edge's operation
    kind: str          #: PRODUCER or CONSUMER


def messaging_spans(m) -> list[Span]:
    """The producer and consumer spans of a compiled app's messaging edges, in edge order. A broker is a
    service at both ends of messaging edges (producers call it, it delivers to consumers); an edge into a
    broker is a producer span at its caller, an edge out of one a consumer span at its callee."""
    edges = [e for e in range(m.E) if m.edge_used[e] and m.edge_async[e] and m.edge_protocol[e] in MESSAGING_PROTOCOLS]
    brokers = {m.edges[e][0] for e in edges} & {m.edges[e][1] for e in edges}
    out = []
    for e in edges:
        caller, callee = m.edges[e]
        spec = m.edge_specs[e]
        op = spec.operations[0] if spec.operations else m.svc_names[callee]
        if caller in brokers:
            out.append(Span(e, m.svc_names[callee], op, CONSUMER))
        elif caller >= 0:
            out.append(Span(e, m.svc_names[caller], op, PRODUCER))
    return out


class SpanMetricsWriter:
    """Writes the span-metrics families of one twin (created by `MetricWriter` when the app sets them).

    Every counter of the twin's spans is one column of a running total (per span: spans without error, with
    error, the duration buckets, the duration sum and count), grown by one increments matrix per write."""

    def __init__(self, sim: "SimBackend"):
        st = sim.store
        ns = sim.app.namespace
        self.spans = messaging_spans(sim.m)
        n = len(self.spans)
        self.n = n
        self.edges = np.array([s.edge for s in self.spans], dtype=np.intp)
        self.consumer = np.array([s.kind == CONSUMER for s in self.spans], dtype=bool)
        lv = [(ns, s.service, s.span_name, s.kind) for s in self.spans]
        self.calls = st.family(CALLS, CATALOGUE[CALLS].labels)
        self.ok_rows = self.calls.rows([v + (OK,) for v in lv])
        self._err_keys = [v + (ERROR,) for v in lv]
        self.err_rows = np.full(n, -1, dtype=np.intp)   # created with the first half error
        self.h_bucket = st.family(DURATION + "_bucket", CATALOGUE[DURATION].labels + ("le",))
        self.h_sum = st.family(DURATION + "_sum", CATALOGUE[DURATION].labels)
        self.h_count = st.family(DURATION + "_count", CATALOGUE[DURATION].labels)
        self.b_rows = np.concatenate([self.h_bucket.rows([v + (le,) for le in LE_LABELS]) for v in lv]) if n else \
            np.zeros(0, dtype=np.intp)
        self.s_rows = self.h_sum.rows(lv)
        self.c_rows = self.h_count.rows(lv)
        L = len(LE_LABELS)
        # running totals: [ok (n) | error (n) | buckets (n x L, span-major) | duration sum (n) | count (n)]
        self._b0, self._s0 = 2 * n, 2 * n + n * L
        self.cum = np.zeros(4 * n + n * L)

    def write(self, k0: int, K: int, dt: float, out) -> None:
        """Counters for ticks ``k0 .. k0+K-1`` from the traffic outputs ``out`` (leading tick axis)."""
        n = self.n
        if not n:
            return
        e, cons = self.edges, self.consumer
        b0, s0 = self._b0, self._s0
        inc = np.empty((K, len(self.cum)))
        # a producer records every publish attempt, failed ones included (broker unreachable: an error); a
        # consumer only the messages it got (while it has no ready pod, messages wait: lag, no spans)
        calls = np.where(cons, out.edge_reached.take(e, axis=1), out.edge_rate.take(e, axis=1))
        calls *= dt
        fail = out.edge_fail.take(e, axis=1)
        errs = np.where(cons, fail - out.edge_unreach.take(e, axis=1), fail)
        errs *= dt
        np.clip(errs, 0.0, calls, out=errs)
        np.subtract(calls, errs, out=inc[:, :n])
        inc[:, n:b0] = errs
        # durations: a consumer span is the message's processing incl. its own calls and network (the edge's
        # source view); a producer span is the publish alone (the hop's own part: the edge's latency in the
        # twin also holds the asynchronous consumption behind the broker)
        lat = np.where(cons, out.edge_lat_src.take(e, axis=1), out.edge_own_lat.take(e, axis=1))
        cdf = bucket_cdf(lat.reshape(-1), out.edge_sigma.take(e, axis=1).reshape(-1)).reshape(K, n, -1)
        hb = inc[:, b0:s0].reshape(K, n, len(LE_LABELS))
        np.multiply(cdf, calls[..., None], out=hb[..., :-1])
        hb[..., -1] = calls
        np.multiply(calls, lat, out=inc[:, s0:s0 + n])
        inc[:, s0 + n:] = calls
        tot = seqsum(self.cum, inc)
        self.cum = tot[-1]
        cols = slice(k0, k0 + K)
        T = tot.T
        self.calls._data[self.ok_rows, cols] = T[:n]
        old = np.flatnonzero(self.err_rows >= 0)
        if len(old):
            self.calls._data[self.err_rows[old], cols] = T[n + old]
        for i in np.flatnonzero((self.err_rows < 0) & (self.cum[n:b0] >= 0.5)):
            self.err_rows[i] = self.calls.row(self._err_keys[i])
            first = int(np.argmax(tot[:, n + i] >= 0.5))   # the series starts at the tick it reaches half an error
            self.calls._data[self.err_rows[i], k0 + first:k0 + K] = tot[first:, n + i]
        self.h_bucket._data[self.b_rows, cols] = T[b0:s0]
        self.h_sum._data[self.s_rows, cols] = T[s0:s0 + n]
        self.h_count._data[self.c_rows, cols] = T[s0 + n:]
