"""Generate the alert rule pack (Prometheus rule-file YAML) from templates.

Run ``python -m sremarathon_env.alerts.rules.generate`` to rewrite ``pack.yaml``; a test checks that
the committed file equals the generator's output and that ``promtool check rules`` accepts it.
Every alert about a workload carries ``service`` (the Deployment name) and ``namespace``; node
alerts carry ``node``; entry-point alerts carry the app's entry ``service`` (and ``path`` where per
path). Templates follow kubernetes-mixin, node-mixin and common community rules, written against
the names in ``sremarathon_env/telemetry/catalogue.py``.

>>> text = render_pack()
>>> text.splitlines()[0]
'# sremarathon-rule-pack-version: 1.3.0'
"""

from __future__ import annotations

from pathlib import Path

import yaml

PACK_VERSION = "1.3.0"
PACK_PATH = Path(__file__).with_name("pack.yaml")
APPS = ("online-boutique", "train-ticket", "astronomy-shop")
#: pod name = <deployment>-<10 chars>-<5 chars> (the ReplicaSet hash alphabet)
_A = "[bcdfghjklmnpqrstvwxz2456789]"
POD_RX = f"(.+)-{_A}{{10}}-{_A}{{5}}"


def by_pod(expr: str) -> str:
    """Attach service = the pod's Deployment, derived from the pod name."""
    return f'label_replace({expr}, "service", "$1", "pod", "{POD_RX}")'


def by_deploy(expr: str) -> str:
    return f'label_replace({expr}, "service", "$1", "deployment", "(.+)")'


def by_workload(expr: str) -> str:
    return f'label_replace({expr}, "service", "$1", "destination_workload", "(.+)")'


def rule(name, template, expr, for_, severity, summary, description, extra_labels=None):
    labels = {"severity": severity, "template": template}
    labels.update(extra_labels or {})
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": labels,
        "annotations": {"summary": summary, "description": description},
    }


def kubernetes_rules() -> list[dict]:
    r = []
    wait = "kube_pod_container_status_waiting_reason"
    crash_sel = wait + '{reason="CrashLoopBackOff"}'
    crash = "max by (namespace, service) (" + by_pod(f"max_over_time({crash_sel}[5m])") + ")"
    r.append(rule("KubePodCrashLooping", "pod-crash-looping", f"{crash} >= 1", "15m", "warning",
                  "Pods of {{ $labels.service }} are crash looping", "{{ $labels.service }} has containers in CrashLoopBackOff for 15 minutes."))
    r.append(rule("PodCrashLooping", "pod-crash-looping", f"{crash} >= 1", "1m", "critical",
                  "Pods of {{ $labels.service }} are crash looping", "{{ $labels.service }} has containers in CrashLoopBackOff."))
    notready = ('sum by (namespace, service) (' + by_pod('kube_pod_status_ready{condition="false"}') + ') > 0')
    r.append(rule("KubePodNotReady", "pod-not-ready", notready, "15m", "warning",
                  "Pods of {{ $labels.service }} not ready", "{{ $value }} pod(s) of {{ $labels.service }} not ready for 15 minutes."))
    r.append(rule("PodNotReady", "pod-not-ready", notready, "2m", "warning",
                  "Pods of {{ $labels.service }} not ready", "{{ $value }} pod(s) of {{ $labels.service }} not ready."))
    pending = ('sum by (namespace, service) (' + by_pod('kube_pod_status_phase{phase=~"Pending|Unknown|Failed"}') + ') > 0')
    r.append(rule("PodNotRunning", "pod-not-ready", pending, "3m", "warning",
                  "Pods of {{ $labels.service }} not running", "{{ $value }} pod(s) of {{ $labels.service }} Pending, Unknown or Failed."))
    mismatch = by_deploy("(kube_deployment_spec_replicas > kube_deployment_status_replicas_available) and on (namespace, deployment) (changes(kube_deployment_status_replicas_updated[10m]) == 0)")
    r.append(rule("KubeDeploymentReplicasMismatch", "replicas-mismatch", mismatch, "15m", "warning",
                  "Deployment {{ $labels.service }} has not matched its desired replicas", "Available replicas below spec for 15 minutes."))
    unavail = by_deploy("(kube_deployment_spec_replicas - kube_deployment_status_replicas_available) > 0")
    r.append(rule("DeploymentReplicasUnavailable", "replicas-mismatch", unavail, "3m", "warning",
                  "Deployment {{ $labels.service }} is missing replicas", "{{ $value }} replica(s) of {{ $labels.service }} unavailable."))
    r.append(rule("DeploymentUnavailable", "replicas-mismatch",
                  by_deploy("(kube_deployment_status_replicas_available == 0) and on (namespace, deployment) (kube_deployment_spec_replicas > 0)"),
                  "1m", "critical", "Deployment {{ $labels.service }} has no available replicas", "No replica of {{ $labels.service }} is available."))
    stuck = by_deploy('kube_deployment_status_condition{condition="Progressing",status="false"} != 0')
    r.append(rule("KubeDeploymentRolloutStuck", "rollout-stuck", stuck, "15m", "warning",
                  "Rollout of {{ $labels.service }} is stuck", "Deployment {{ $labels.service }} is not progressing."))
    r.append(rule("DeploymentRolloutStuck", "rollout-stuck", stuck, "2m", "warning",
                  "Rollout of {{ $labels.service }} is stuck", "Deployment {{ $labels.service }} is not progressing."))
    r.append(rule("KubeDeploymentGenerationMismatch", "generation-mismatch",
                  by_deploy("kube_deployment_status_observed_generation != kube_deployment_metadata_generation"), "15m", "warning",
                  "Deployment {{ $labels.service }} generation mismatch", "Observed generation differs from the spec generation."))
    waiting = "sum by (namespace, service, reason) (" + by_pod(wait + '{reason!="CrashLoopBackOff"}') + ") > 0"
    r.append(rule("KubeContainerWaiting", "container-waiting", waiting, "1h", "warning",
                  "Containers of {{ $labels.service }} waiting", "Containers of {{ $labels.service }} waiting ({{ $labels.reason }}) for an hour."))
    r.append(rule("ContainerWaiting", "container-waiting", waiting, "10m", "warning",
                  "Containers of {{ $labels.service }} waiting", "Containers of {{ $labels.service }} waiting ({{ $labels.reason }})."))
    pull = "sum by (namespace, service, reason) (" + by_pod(wait + '{reason=~"ErrImagePull|ImagePullBackOff|InvalidImageName"}') + ") > 0"
    r.append(rule("ImagePullFailing", "image-pull-failing", pull, "2m", "warning",
                  "Image pull failing for {{ $labels.service }}", "Containers of {{ $labels.service }} cannot pull their image ({{ $labels.reason }})."))
    cfg = "sum by (namespace, service, reason) (" + by_pod(wait + '{reason=~"CreateContainerConfigError|CreateContainerError"}') + ") > 0"
    r.append(rule("ContainerConfigError", "config-error", cfg, "2m", "warning",
                  "Configuration error starting {{ $labels.service }}", "Containers of {{ $labels.service }} cannot be created ({{ $labels.reason }})."))
    oom = ('max by (namespace, service) (' + by_pod(
        '(increase(kube_pod_container_status_restarts_total[10m]) > 0) and on (namespace, pod, container) '
        '(kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} == 1)') + ')')
    r.append(rule("PodOOMKilled", "oom-killed", oom, "0s", "warning",
                  "{{ $labels.service }} was OOM-killed", "Containers of {{ $labels.service }} were killed for exceeding their memory limit."))
    r.append(rule("ContainerOOMEvents", "oom-killed",
                  'max by (namespace, service) (' + by_pod("increase(container_oom_events_total[5m])") + ') > 0', "0s", "warning",
                  "OOM events in {{ $labels.service }}", "{{ $value }} OOM event(s) in {{ $labels.service }} over 5 minutes."))
    ratio = ('max by (namespace, service) (' + by_pod(
        'container_memory_working_set_bytes / on (namespace, pod, container) kube_pod_container_resource_limits{resource="memory"}') + ')')
    r.append(rule("ContainerMemoryNearLimit", "memory-near-limit", f"{ratio} > 0.9", "5m", "warning",
                  "{{ $labels.service }} near its memory limit", "Working set at {{ $value }} of the memory limit."))
    r.append(rule("ContainerMemoryAtLimit", "memory-near-limit", f"{ratio} > 0.97", "1m", "critical",
                  "{{ $labels.service }} at its memory limit", "Working set at {{ $value }} of the memory limit."))
    thr = ('max by (namespace, service) (' + by_pod(
        'sum by (namespace, pod, container) (increase(container_cpu_cfs_throttled_periods_total[5m])) / '
        'sum by (namespace, pod, container) (increase(container_cpu_cfs_periods_total[5m]))') + ')')
    r.append(rule("CPUThrottlingHigh", "cpu-throttling", f"{thr} > 0.25", "15m", "info",
                  "{{ $labels.service }} is CPU throttled", "{{ $value }} of CFS periods throttled."))
    r.append(rule("CPUThrottlingSevere", "cpu-throttling", f"{thr} > 0.5", "5m", "warning",
                  "{{ $labels.service }} is heavily CPU throttled", "{{ $value }} of CFS periods throttled."))
    restarts = 'sum by (namespace, service) (' + by_pod("increase(kube_pod_container_status_restarts_total[15m])") + ')'
    r.append(rule("PodRestartingFrequently", "pod-crash-looping", f"{restarts} > 3", "0s", "warning",
                  "{{ $labels.service }} restarting frequently", "{{ $value }} restarts of {{ $labels.service }} in 15 minutes."))
    r.append(rule("ContainerRestarted", "pod-crash-looping", f"{restarts} > 0", "0s", "info",
                  "{{ $labels.service }} restarted", "{{ $value }} restart(s) of {{ $labels.service }} in 15 minutes."))
    noep = 'label_replace(kube_endpoint_address_available == 0, "service", "$1", "endpoint", "(.+)")'
    r.append(rule("ServiceHasNoEndpoints", "no-endpoints", noep, "1m", "critical",
                  "Service {{ $labels.service }} has no ready endpoints", "No ready address behind Service {{ $labels.service }}."))
    r.append(rule("TargetDown", "target-down",
                  "100 * (count by (job, namespace, service) (up == 0) / count by (job, namespace, service) (up)) > 10", "10m", "warning",
                  "Targets of {{ $labels.service }} down", "{{ $value }}% of {{ $labels.job }} targets of {{ $labels.service }} are down."))
    return r


def node_rules() -> list[dict]:
    r = []
    nr = 'kube_node_status_condition{condition="Ready",status="true"} == 0'
    r.append(rule("KubeNodeNotReady", "node-not-ready", nr, "15m", "warning",
                  "Node {{ $labels.node }} not ready", "{{ $labels.node }} has been unready for 15 minutes."))
    r.append(rule("NodeNotReady", "node-not-ready", nr, "1m", "critical",
                  "Node {{ $labels.node }} not ready", "{{ $labels.node }} is not ready."))
    r.append(rule("KubeNodePressure", "node-pressure",
                  'kube_node_status_condition{condition=~"MemoryPressure|DiskPressure|PIDPressure",status="true"} == 1', "10m", "info",
                  "Node {{ $labels.node }} under {{ $labels.condition }}", "{{ $labels.node }} reports {{ $labels.condition }}."))
    r.append(rule("KubeNodeUnschedulable", "node-not-ready", "kube_node_spec_unschedulable == 1", "5m", "info",
                  "Node {{ $labels.node }} cordoned", "{{ $labels.node }} is unschedulable."))
    r.append(rule("KubeCPUOvercommit", "overcommit",
                  'sum(kube_pod_container_resource_requests{resource="cpu"}) - sum(kube_node_status_allocatable{resource="cpu"}) > 0',
                  "10m", "warning", "Cluster CPU overcommitted", "CPU requests exceed allocatable CPU by {{ $value }} cores."))
    r.append(rule("KubeMemoryOvercommit", "overcommit",
                  'sum(kube_pod_container_resource_requests{resource="memory"}) - sum(kube_node_status_allocatable{resource="memory"}) > 0',
                  "10m", "warning", "Cluster memory overcommitted", "Memory requests exceed allocatable memory by {{ $value }} bytes."))
    return r


def quota_rules() -> list[dict]:
    used = 'kube_resourcequota{type="used"} / ignoring (type) (kube_resourcequota{type="hard"} > 0)'
    return [
        rule("KubeQuotaAlmostFull", "quota", f"{used} > 0.9 < 1", "15m", "info",
             "Quota {{ $labels.resourcequota }} almost full", "{{ $labels.resource }} at {{ $value }} of its quota."),
        rule("KubeQuotaFullyUsed", "quota", f"{used} == 1", "15m", "info",
             "Quota {{ $labels.resourcequota }} fully used", "{{ $labels.resource }} uses its whole quota."),
        rule("KubeQuotaExceeded", "quota", f"{used} > 1", "15m", "warning",
             "Quota {{ $labels.resourcequota }} exceeded", "{{ $labels.resource }} at {{ $value }} of its quota."),
    ]


def mesh_rules() -> list[dict]:
    r = []
    dst = 'istio_requests_total{reporter="destination"'
    err = (f'sum by (namespace, destination_workload) (rate({dst},response_code=~"5.."}}[5m])) / '
           f'sum by (namespace, destination_workload) (rate({dst}}}[5m]))')
    r.append(rule("ServiceErrorRateHigh", "service-error-ratio", by_workload(f"{err} > 0.05"), "5m", "warning",
                  "{{ $labels.service }} serves errors", "{{ $value }} of requests to {{ $labels.service }} fail."))
    r.append(rule("ServiceErrorRateCritical", "service-error-ratio", by_workload(f"{err} > 0.2"), "2m", "critical",
                  "{{ $labels.service }} serves many errors", "{{ $value }} of requests to {{ $labels.service }} fail."))
    src = 'istio_requests_total{reporter="source"'
    fail = (f'sum by (namespace, destination_workload) (rate({src},response_code=~"5..|0"}}[5m])) / '
            f'sum by (namespace, destination_workload) (rate({src}}}[5m]))')
    r.append(rule("ServiceCallFailuresHigh", "service-error-ratio", by_workload(f"{fail} > 0.1"), "3m", "warning",
                  "Calls to {{ $labels.service }} failing", "{{ $value }} of calls to {{ $labels.service }} fail as callers see them."))
    p99 = ('histogram_quantile(0.99, sum by (namespace, destination_workload, le) '
           '(rate(istio_request_duration_milliseconds_bucket{reporter="destination"}[5m])))')
    p50 = ('histogram_quantile(0.5, sum by (namespace, destination_workload, le) '
           '(rate(istio_request_duration_milliseconds_bucket{reporter="destination"}[5m])))')
    r.append(rule("ServiceLatencyP99High", "service-latency", by_workload(f"{p99} > 1000"), "5m", "warning",
                  "{{ $labels.service }} is slow", "p99 latency of {{ $labels.service }} is {{ $value }} ms."))
    r.append(rule("ServiceLatencyP99Critical", "service-latency", by_workload(f"{p99} > 2500"), "2m", "critical",
                  "{{ $labels.service }} is very slow", "p99 latency of {{ $labels.service }} is {{ $value }} ms."))
    r.append(rule("ServiceLatencyP50High", "service-latency", by_workload(f"{p50} > 250"), "5m", "warning",
                  "{{ $labels.service }} median latency high", "p50 latency of {{ $labels.service }} is {{ $value }} ms."))
    # a slow edge (network delay, a slow dependency as one caller sees it): more than 1 % of one caller's calls
    # to one callee take over 1 s (its p99 above the 1000 ms bucket bound), so a delay on a low-traffic route
    # shows where the callee-wide p99 above hides it; two series per edge, no quantile; service = the caller
    edge = "namespace, source_workload, destination_workload"
    le_1s = 'istio_request_duration_milliseconds_bucket{reporter="source",le="1000"}'
    calls = 'istio_request_duration_milliseconds_count{reporter="source"}'
    slow = f"1 - sum by ({edge}) (rate({le_1s}[5m])) / sum by ({edge}) (rate({calls}[5m]))"
    r.append(rule("ServiceCallLatencyHigh", "service-latency",
                  f'label_replace({slow} > 0.01, "service", "$1", "source_workload", "(.+)")', "3m", "warning",
                  "Calls from {{ $labels.service }} to {{ $labels.destination_workload }} are slow",
                  "{{ $value }} of calls from {{ $labels.service }} to "
                  "{{ $labels.destination_workload }} take over 1 s as the caller sees them."))
    # a failing edge (a partition or packet loss on one route, a dependency failing one caller): more than 10 % of
    # one caller's calls to one callee fail, at least 1.5 times the callee-wide share above (which the callee's other
    # callers dilute: that rule fires late or never for a low-traffic route; a route with half or more of the callee's
    # calls still counts); a callee failing alike for every caller is ServiceCallFailuresHigh alone, not one alert per
    # caller as well; service = the caller
    edge_fail = (f'sum by ({edge}) (rate({src},response_code=~"5..|0"}}[5m])) / '
                 f'sum by ({edge}) (rate({src}}}[5m]))')
    r.append(rule("ServiceCallErrorsHigh", "service-error-ratio",
                  f'label_replace(({edge_fail} > 0.1) > on (namespace, destination_workload) group_left 1.5 * ({fail}), '
                  f'"service", "$1", "source_workload", "(.+)")', "3m", "warning",
                  "Calls from {{ $labels.service }} to {{ $labels.destination_workload }} fail",
                  "{{ $value }} of calls from {{ $labels.service }} to "
                  "{{ $labels.destination_workload }} fail as the caller sees them."))
    r.append(rule("ServiceTrafficStopped", "service-traffic",
                  by_workload(f'(sum by (namespace, destination_workload) (rate({dst}}}[5m] offset 10m)) > 0.1) unless on (namespace, destination_workload) '
                              f'(sum by (namespace, destination_workload) (rate({dst}}}[2m])) > 0)'),
                  "2m", "critical", "{{ $labels.service }} receives no traffic", "{{ $labels.service }} served requests 10 minutes ago and none now."))
    return r


def entry_rules(app: str, namespace: str, entry: str) -> list[dict]:
    r = []
    lg = f'loadgenerator_requests_total{{namespace="{namespace}"'
    svc = {"service": entry}
    path_err = (f'sum by (namespace, path) (rate({lg},status="failed"}}[5m])) / sum by (namespace, path) (rate({lg}}}[5m]))')
    r.append(rule("EntryPathErrorRateHigh", "entry-error-ratio", f"{path_err} > 0.05", "2m", "warning",
                  "Users see errors on {{ $labels.path }}", "{{ $value }} of requests to {{ $labels.path }} fail.", svc))
    total_err = (f'sum by (namespace) (rate({lg},status="failed"}}[5m])) / sum by (namespace) (rate({lg}}}[5m]))')
    r.append(rule("EntryErrorRateHigh", "entry-error-ratio", f"{total_err} > 0.02", "2m", "critical",
                  "Users see errors", "{{ $value }} of entry requests fail.", svc))
    slow = (f'sum by (namespace, path) (rate(loadgenerator_slow_requests_total{{namespace="{namespace}"}}[5m])) / '
            f'sum by (namespace, path) (rate({lg}}}[5m]))')
    r.append(rule("EntryPathSlowRequestsHigh", "entry-latency", f"{slow} > 0.1", "2m", "warning",
                  "Users see slow responses on {{ $labels.path }}", "{{ $value }} of requests to {{ $labels.path }} take over 2.5 s.", svc))
    degr = (f'sum by (namespace, path) (rate(loadgenerator_degraded_requests_total{{namespace="{namespace}"}}[5m])) / '
            f'sum by (namespace, path) (rate({lg}}}[5m]))')
    r.append(rule("EntryPathDegraded", "entry-degraded", f"{degr} > 0.2", "5m", "info",
                  "Responses on {{ $labels.path }} miss features", "{{ $value }} of responses on {{ $labels.path }} are degraded.", svc))
    budget = 0.005  # 99.5 % availability SLO
    def ratio(w):
        return f'(sum by (namespace) (rate({lg},status="failed"}}[{w}])) / sum by (namespace) (rate({lg}}}[{w}])))'
    r.append(rule("ErrorBudgetBurnFast", "error-budget-burn",
                  f"{ratio('1h')} > {14.4 * budget:g} and {ratio('5m')} > {14.4 * budget:g}", "2m", "critical",
                  "Error budget burning fast", "Entry error ratio burns the 99.5% SLO budget over 14 times too fast.", svc))
    r.append(rule("ErrorBudgetBurnMedium", "error-budget-burn",
                  f"{ratio('6h')} > {6 * budget:g} and {ratio('30m')} > {6 * budget:g}", "15m", "critical",
                  "Error budget burning", "Entry error ratio burns the 99.5% SLO budget 6 times too fast.", svc))
    r.append(rule("ErrorBudgetBurnSlow", "error-budget-burn",
                  f"{ratio('1d')} > {3 * budget:g} and {ratio('2h')} > {3 * budget:g}", "1h", "warning",
                  "Error budget burning slowly", "Entry error ratio burns the 99.5% SLO budget 3 times too fast.", svc))
    if app == "astronomy-shop":
        r.append(rule("KafkaConsumerLagHigh", "kafka-consumer-lag",
                      f'label_replace(max by (namespace, consumergroup, topic) (kafka_consumergroup_lag{{namespace="{namespace}"}}) > 100, '
                      '"service", "$1", "consumergroup", "(.+)")', "5m", "warning",
                      "Consumer group {{ $labels.consumergroup }} lags", "{{ $value }} messages of {{ $labels.topic }} not consumed."))
        r.append(rule("KafkaConsumerLagGrowing", "kafka-consumer-lag",
                      f'label_replace(deriv(kafka_consumergroup_lag{{namespace="{namespace}"}}[5m]) > 1, '
                      '"service", "$1", "consumergroup", "(.+)")', "5m", "warning",
                      "Consumer group {{ $labels.consumergroup }} falling behind", "Lag of {{ $labels.topic }} grows by {{ $value }} messages/s."))
        r.extend(messaging_span_rules(namespace))
    return r


def messaging_span_rules(namespace: str) -> list[dict]:
    """Producer and consumer spans of the messaging edges (the collector's span metrics): what the mesh and,
    at a low message rate, the consumer lag cannot show (a consumer whose processing fails or slows down, a
    producer that cannot publish or a slow broker). One rule per symptom over both span kinds (the kind is
    a label); service = the span's service."""
    calls = f'traces_span_metrics_calls_total{{namespace="{namespace}"'
    by = "namespace, service_name, span_name, span_kind"
    err = (f'sum by ({by}) (rate({calls},status_code="STATUS_CODE_ERROR"}}[5m])) / '
           f'sum by ({by}) (rate({calls}}}[5m]))')
    p95 = (f'histogram_quantile(0.95, sum by ({by}, le) (rate(traces_span_metrics_duration_milliseconds_bucket'
           f'{{namespace="{namespace}"}}[5m])))')

    def by_span(expr: str) -> str:
        return f'label_replace({expr}, "service", "$1", "service_name", "(.+)")'

    return [
        rule("MessagingSpanErrorsHigh", "messaging-errors", by_span(f"{err} > 0.05"), "2m", "warning",
             "{{ $labels.service }} fails {{ $labels.span_name }}",
             "{{ $value }} of {{ $labels.span_name }} spans ({{ $labels.span_kind }}) of {{ $labels.service }} "
             "end in an error."),
        rule("MessagingSpanLatencyHigh", "messaging-latency", by_span(f"{p95} > 500"), "2m", "warning",
             "{{ $labels.service }} is slow in {{ $labels.span_name }}",
             "p95 of {{ $labels.span_name }} spans ({{ $labels.span_kind }}) of {{ $labels.service }} is "
             "{{ $value }} ms."),
    ]


def build_pack() -> dict:
    from apps import load_app

    groups = [
        {"name": "sremarathon.kubernetes", "interval": "15s", "rules": kubernetes_rules()},
        {"name": "sremarathon.nodes", "interval": "15s", "rules": node_rules() + quota_rules()},
        {"name": "sremarathon.mesh", "interval": "15s", "rules": mesh_rules()},
    ]
    for app in APPS:
        spec = load_app(app)
        groups.append({"name": f"sremarathon.entry.{app}", "interval": "15s",
                       "rules": entry_rules(app, spec.namespace, spec.entry_service)})
    return {"groups": groups}


def render_pack() -> str:
    header = (f"# sremarathon-rule-pack-version: {PACK_VERSION}\n"
              "# Generated by sremarathon_env/alerts/rules/generate.py - do not edit; agents cannot change it.\n")
    return header + yaml.safe_dump(build_pack(), sort_keys=False, width=10_000, allow_unicode=True)


def main() -> None:
    PACK_PATH.write_text(render_pack())
    print(f"wrote {PACK_PATH}")


if __name__ == "__main__":
    main()
