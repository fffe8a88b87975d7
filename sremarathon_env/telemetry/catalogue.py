"""The metric catalogue: every series family the twin exports, with its type and labels.

This is the contract between the twin (which writes these) and the rule pack and agents (which
query them). Names and labels follow kube-state-metrics, cAdvisor and Istio's standard metrics, so
the same PromQL works against a real Prometheus scraping a live cluster. Every series also carries
``namespace`` (the app's namespace) except node-level ones.

Request telemetry is modelled as a service mesh's (Istio standard metrics, ``reporter="destination"``
for the server side, ``reporter="source"`` for the client side of an edge). Calls from the load
generator have ``source_workload="loadgenerator"``. Entry-path traffic as the load generator sees it
is ``loadgenerator_requests_total`` (status ``ok`` / ``failed``; ``slow`` counts requests over 2.5 s).
Messaging (Kafka) spans, which the mesh cannot see, come from the OpenTelemetry collector's spanmetrics
connector where the app runs it (``span_metrics`` in its model; `sremarathon_env.backends.sim.spanmetrics`).

>>> CATALOGUE["kube_pod_status_ready"].labels
('namespace', 'pod', 'condition')
"""

from __future__ import annotations

from typing import Literal, NamedTuple

#: Istio's default duration buckets (milliseconds), plus the implicit +Inf.
LATENCY_BUCKETS_MS = (0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
#: their ``le`` label values, +Inf last (the duration histograms' bucket series)
LE_LABELS = tuple(("%g" % b) for b in LATENCY_BUCKETS_MS) + ("+Inf",)


class MetricDef(NamedTuple):
    type: Literal["gauge", "counter", "histogram"]
    labels: tuple[str, ...]
    help: str


_POD = ("namespace", "pod")
_CTR = ("namespace", "pod", "container")

CATALOGUE: dict[str, MetricDef] = {
    # kube-state-metrics: pods
    "kube_pod_info": MetricDef("gauge", ("namespace", "pod", "node", "created_by_kind", "created_by_name", "host_ip"), "1 per pod, with placement and owner ReplicaSet"),
    "kube_pod_owner": MetricDef("gauge", ("namespace", "pod", "owner_kind", "owner_name"), "1 per pod, owning ReplicaSet"),
    "kube_pod_labels": MetricDef("gauge", ("namespace", "pod", "label_app"), "1 per pod, its app label (= the Deployment name)"),
    "kube_pod_status_phase": MetricDef("gauge", ("namespace", "pod", "phase"), "1 for the pod's current phase (Pending, Running, Succeeded, Failed, Unknown), 0 for the others"),
    "kube_pod_status_ready": MetricDef("gauge", ("namespace", "pod", "condition"), "condition true/false/unknown: 1 for the one that holds"),
    "kube_pod_container_status_ready": MetricDef("gauge", _CTR, "1 if the container passes readiness"),
    "kube_pod_container_status_running": MetricDef("gauge", _CTR, "1 if the container is running"),
    "kube_pod_container_status_waiting": MetricDef("gauge", _CTR, "1 if the container is waiting"),
    "kube_pod_container_status_waiting_reason": MetricDef("gauge", _CTR + ("reason",), "1 while waiting with this reason (ContainerCreating, CrashLoopBackOff, ErrImagePull, ImagePullBackOff, CreateContainerConfigError)"),
    "kube_pod_container_status_restarts_total": MetricDef("counter", _CTR, "container restarts"),
    "kube_pod_container_status_last_terminated_reason": MetricDef("gauge", _CTR + ("reason",), "1 for the reason of the last termination (OOMKilled, Error, Completed)"),
    "kube_pod_container_resource_requests": MetricDef("gauge", _CTR + ("node", "resource", "unit"), "requests: resource cpu (unit core) or memory (unit byte)"),
    "kube_pod_container_resource_limits": MetricDef("gauge", _CTR + ("node", "resource", "unit"), "limits: resource cpu (unit core) or memory (unit byte)"),
    # kube-state-metrics: deployments, replicasets, endpoints, nodes, quotas
    "kube_deployment_spec_replicas": MetricDef("gauge", ("namespace", "deployment"), "desired replicas"),
    "kube_deployment_status_replicas": MetricDef("gauge", ("namespace", "deployment"), "pods targeted (all revisions)"),
    "kube_deployment_status_replicas_available": MetricDef("gauge", ("namespace", "deployment"), "available (ready) replicas"),
    "kube_deployment_status_replicas_unavailable": MetricDef("gauge", ("namespace", "deployment"), "unavailable replicas"),
    "kube_deployment_status_replicas_updated": MetricDef("gauge", ("namespace", "deployment"), "replicas of the newest revision"),
    "kube_deployment_status_condition": MetricDef("gauge", ("namespace", "deployment", "condition", "status"), "Available/Progressing with status true/false/unknown"),
    "kube_deployment_metadata_generation": MetricDef("gauge", ("namespace", "deployment"), "spec generation"),
    "kube_deployment_status_observed_generation": MetricDef("gauge", ("namespace", "deployment"), "generation observed by the controller"),
    "kube_replicaset_status_ready_replicas": MetricDef("gauge", ("namespace", "replicaset"), "ready replicas per ReplicaSet (revision)"),
    "kube_endpoint_address_available": MetricDef("gauge", ("namespace", "endpoint"), "ready addresses behind a Service"),
    "kube_endpoint_address_not_ready": MetricDef("gauge", ("namespace", "endpoint"), "not-ready addresses behind a Service"),
    "kube_node_status_condition": MetricDef("gauge", ("node", "condition", "status"), "Ready/MemoryPressure/DiskPressure/PIDPressure with status true/false/unknown"),
    "kube_node_spec_unschedulable": MetricDef("gauge", ("node",), "1 when cordoned"),
    "kube_node_labels": MetricDef("gauge", ("node", "label_topology_kubernetes_io_zone"), "node zone"),
    "kube_node_status_allocatable": MetricDef("gauge", ("node", "resource", "unit"), "allocatable cpu (core) / memory (byte)"),
    "kube_resourcequota": MetricDef("gauge", ("namespace", "resourcequota", "resource", "type"), "quota hard/used per resource"),
    # cAdvisor (kubelet)
    "container_cpu_usage_seconds_total": MetricDef("counter", _CTR + ("node",), "CPU seconds used"),
    "container_cpu_cfs_periods_total": MetricDef("counter", _CTR + ("node",), "elapsed CFS periods (100 ms each) with runnable work"),
    "container_cpu_cfs_throttled_periods_total": MetricDef("counter", _CTR + ("node",), "CFS periods throttled by the CPU limit"),
    "container_memory_working_set_bytes": MetricDef("gauge", _CTR + ("node",), "memory working set"),
    "container_oom_events_total": MetricDef("counter", _CTR + ("node",), "OOM kills of the container"),
    "up": MetricDef("gauge", ("job", "namespace", "pod", "service"), "1 if the pod's metrics endpoint answered the scrape"),
    # service mesh (Istio standard metrics)
    "istio_requests_total": MetricDef("counter", ("namespace", "reporter", "source_workload", "destination_workload", "destination_service", "response_code", "response_flags"), "requests by edge and response code (200, 500, 503, 504; 0 when no response) and Envoy flags (- , UF, URX, UH, DC, UT)"),
    "istio_request_duration_milliseconds": MetricDef("histogram", ("namespace", "reporter", "source_workload", "destination_workload"), "request duration histogram: _bucket{le}, _sum, _count"),
    # load generator (entry point as users see it)
    "loadgenerator_requests_total": MetricDef("counter", ("namespace", "path", "method", "status"), "entry requests by request path and status ok/failed"),
    "loadgenerator_slow_requests_total": MetricDef("counter", ("namespace", "path", "method"), "entry requests slower than 2.5 s"),
    "loadgenerator_degraded_requests_total": MetricDef("counter", ("namespace", "path", "method"), "entry requests that succeeded with a feature missing (ads, recommendations...)"),
    # async (Kafka / RabbitMQ)
    "kafka_consumergroup_lag": MetricDef("gauge", ("namespace", "consumergroup", "topic"), "messages not yet consumed"),
    # OpenTelemetry collector spanmetrics connector: messaging spans, for apps that run it (the Astronomy Shop)
    "traces_span_metrics_calls_total": MetricDef("counter", ("namespace", "service_name", "span_name", "span_kind", "status_code"), "producer and consumer spans of messaging edges by status (STATUS_CODE_UNSET, STATUS_CODE_ERROR)"),
    "traces_span_metrics_duration_milliseconds": MetricDef("histogram", ("namespace", "service_name", "span_name", "span_kind"), "span duration histogram (consumer: the processing incl. its own calls; producer: the publish): _bucket{le}, _sum, _count"),
}
