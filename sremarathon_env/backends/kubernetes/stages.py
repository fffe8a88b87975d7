"""kwok Stage objects: how simulated nodes and pods move through their lifecycle, faults included.

kwok plays the kubelet: each watch event on a Node or Pod is matched against these stages (jq
selectors) and the chosen stage's Go template is written into the object's status. Supplying any
stage replaces all of kwok's defaults, so this module writes the whole set, ours:

- nodes: initialise to Ready and heartbeat (a node labelled ``sremarathon.io/node-fault`` is left out
  of kwok's selection altogether: its simulated kubelet goes silent, see `cluster`);
- pods: delete on ``deletionTimestamp``; ``Running``/Ready once scheduled; image pull back-off when
  the image's tag is not pullable (selected by image: see `pullable_image_regex`); crash loop
  (``sremarathon.io/fault=crashloop``, exit 1) and OOM kill (``=oom``, exit 137) with a restart count
  that keeps growing; readiness failure (``=unready``: Running, not Ready, so it leaves the
  EndpointSlices); ``=healed`` brings a pod that an earlier fault left not Ready back to Ready.

>>> docs = kwok_config_documents()
>>> sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Stage")[:3]
['sre-node-heartbeat', 'sre-node-initialize', 'sre-pod-crashloop']
>>> import re; rx = re.compile(pullable_image_regex())
>>> bool(rx.search("redis:alpine")), bool(rx.search("x/adservice:v0.10.6")), bool(rx.search("x/adservice:v0,10.6"))
(True, True, False)
"""

from __future__ import annotations

import re
from typing import Any

import yaml

FAULT_ANNOTATION = "sremarathon.io/fault"
NODE_FAULT_LABEL = "sremarathon.io/node-fault"
POD_FAULTS = ("crashloop", "oom", "unready")
HEALED = "healed"
CRASH_PERIOD_MS = 10_000

_VERSION_TAG = r"v?[0-9]+(\.[0-9]+){1,2}([-+][0-9A-Za-z.-]+)?"


def pullable_image_regex(extra_tags: list[str] | None = None) -> str:
    """RE2 regex (jq ``test``) matching an image reference whose tag the simulated registry serves:
    no tag (implicitly ``latest``), a digest, a version-shaped tag (``v1.2.3``, ``2.2.0-cart``,
    ``v0.10.6-abc1234``) or one of the non-version tags the bundled apps use (``alpine``...), also with
    the twin's build suffix (``alpine-abc1234``)."""
    tags = set(extra_tags or [])
    try:
        from apps import load_app
        from apps.spec import AppSpec  # noqa: F401 - only to make sure the app model imports
        for name in ("online-boutique", "astronomy-shop", "train-ticket"):
            for s in load_app(name).services:
                if not re.fullmatch(_VERSION_TAG, s.tag):
                    tags.add(s.tag)
    except Exception:  # noqa: BLE001 - stages must still be writable without the bundled apps
        pass
    alts = "|".join(re.escape(t) for t in sorted(tags))
    named = f"|({alts})(-[0-9a-f]{{7}})?" if alts else ""
    return rf"^([^/]*/)*[^/:@]+$|@sha256:[0-9a-f]{{64}}$|:({_VERSION_TAG}{named})$"


def _image_key(rx: str) -> str:
    """A jq expression: ``true``/``false`` per container image (backslashes doubled for jq's string)."""
    lit = rx.replace("\\", "\\\\").replace('"', '\\"')
    return f'.spec.containers[].image | test("{lit}")'


def _not_deleted() -> dict[str, Any]:
    return {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}


def _fault_is(*values: str) -> dict[str, Any]:
    return {"key": f'.metadata.annotations["{FAULT_ANNOTATION}"]', "operator": "In", "values": list(values)}


def _stage(name: str, kind: str, exprs: list[dict], next_: dict, *, weight: int = 0,
           delay_ms: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": kind},
                            "selector": {"matchExpressions": exprs}, "next": next_}
    if weight:
        spec["weight"] = weight
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


_NODE_STATUS = """{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with .status.addresses }}
{{ YAML . 1 }}
{{ else }}
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ NodeName | Quote }}
  type: Hostname
{{ end }}
{{ with NodePort }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ . }}
{{ end }}
allocatable:
{{ with .status.allocatable }}
{{ YAML . 1 }}
{{ else }}
  cpu: "4"
  memory: 16Gi
  pods: "110"
{{ end }}
capacity:
{{ with .status.capacity }}
{{ YAML . 1 }}
{{ else }}
  cpu: "4"
  memory: 16Gi
  pods: "110"
{{ end }}
nodeInfo:
  architecture: amd64
  containerRuntimeVersion: kwok
  kubeletVersion: kwok
  kernelVersion: kwok
  operatingSystem: linux
  osImage: kwok
phase: Running
"""

_POD_HEAD = """{{ $now := Now }}
{{ if not .status.hostIP }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ end }}
{{ if not .status.podIP }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ end }}
startTime: {{ or .status.startTime $now | Quote }}
"""


def _pod_conditions(ready: bool) -> str:
    st = '"True"' if ready else '"False"'
    extra = "" if ready else "\n  reason: ContainersNotReady"
    return f"""conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "True"
  type: PodScheduled
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "True"
  type: Initialized
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: {st}
  type: ContainersReady{extra}
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: {st}
  type: Ready{extra}
"""


def _running_statuses(ready: bool, restart_count: str = "0") -> str:
    """``containerStatuses`` with every container running (``ready`` or not) and ``phase: Running``;
    ``restart_count`` is the template expression of each container's restartCount."""
    return f"""containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: {str(ready).lower()}
  started: true
  restartCount: {restart_count}
  state:
    running:
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: Running
"""


_POD_READY = _POD_HEAD + _pod_conditions(True) + _running_statuses(True)

# a healed pod keeps the restart count it had
_POD_HEALED = _POD_HEAD + _pod_conditions(True) + """{{ $rc := 0 }}
{{ range .status.containerStatuses }}{{ $rc = .restartCount }}{{ end }}
""" + _running_statuses(True, "{{ $rc }}")

_POD_UNREADY = _POD_HEAD + _pod_conditions(False) + _running_statuses(False)

# restartCount grows by one per application; the stage matches its own output again after its delay
_POD_CRASH = _POD_HEAD + _pod_conditions(False) + """{{ $rc := 0 }}
{{ range .status.containerStatuses }}{{ $rc = add1 .restartCount }}{{ end }}
{{ $oom := eq (index .metadata.annotations "sremarathon.io/fault") "oom" }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: {{ $rc }}
  lastState:
    terminated:
      exitCode: {{ if $oom }}137{{ else }}1{{ end }}
      reason: {{ if $oom }}OOMKilled{{ else }}Error{{ end }}
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  state:
    waiting:
      reason: CrashLoopBackOff
      message: {{ printf "back-off restarting failed container %s" .name | Quote }}
{{ end }}
phase: Running
"""

_POD_IMAGE_PULL = """{{ $now := Now }}
""" + _pod_conditions(False) + """containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    waiting:
      reason: ImagePullBackOff
      message: {{ printf "Back-off pulling image %q" .image | Quote }}
{{ end }}
phase: Pending
"""


def stages(extra_tags: list[str] | None = None) -> list[dict[str, Any]]:
    """Every Stage object, nodes first (deterministic order)."""
    rx = pullable_image_regex(extra_tags)
    ready_is = '.status.conditions[] | select(.type == "Ready") | .status'
    node_faulty = f'.metadata.labels["{NODE_FAULT_LABEL}"]'
    image_ok = {"key": _image_key(rx), "operator": "NotIn", "values": ["false"]}
    no_fault = {"key": f'.metadata.annotations["{FAULT_ANNOTATION}"]', "operator": "NotIn",
                "values": [*POD_FAULTS, HEALED]}
    return [
        _stage("sre-node-initialize", "Node",
               [{"key": ready_is, "operator": "NotIn", "values": ["True"]},
                {"key": node_faulty, "operator": "NotIn", "values": ["notready"]}],
               {"statusTemplate": _NODE_STATUS}),
        _stage("sre-node-heartbeat", "Node",
               [{"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ready_is, "operator": "In", "values": ["True"]},
                {"key": node_faulty, "operator": "NotIn", "values": ["notready"]}],
               {"statusTemplate": _NODE_STATUS}, delay_ms=20_000),
        _stage("sre-pod-delete", "Pod", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
               {"delete": True}),
        _stage("sre-pod-ready", "Pod",
               [_not_deleted(), {"key": ".spec.nodeName", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                {"key": ready_is, "operator": "NotIn", "values": ["True"]}, image_ok, no_fault],
               {"statusTemplate": _POD_READY}),
        _stage("sre-pod-image-pull-backoff", "Pod",
               [_not_deleted(), {"key": ".spec.nodeName", "operator": "Exists"},
                {"key": _image_key(rx), "operator": "In", "values": ["false"]},
                {"key": ".status.containerStatuses[].state.waiting.reason", "operator": "NotIn",
                 "values": ["ImagePullBackOff"]}],
               {"statusTemplate": _POD_IMAGE_PULL,
                "event": {"type": "Warning", "reason": "Failed",
                          "message": "Failed to pull image: manifest unknown"}},
               weight=1_000, delay_ms=1_000),
        _stage("sre-pod-crashloop", "Pod",
               [_not_deleted(), {"key": ".spec.nodeName", "operator": "Exists"}, image_ok,
                _fault_is("crashloop", "oom")],
               {"statusTemplate": _POD_CRASH,
                "event": {"type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container"}},
               weight=1_000, delay_ms=CRASH_PERIOD_MS),
        _stage("sre-pod-unready", "Pod",
               [_not_deleted(), {"key": ".spec.nodeName", "operator": "Exists"}, image_ok, _fault_is("unready"),
                {"key": ready_is, "operator": "NotIn", "values": ["False"]}],
               {"statusTemplate": _POD_UNREADY,
                "event": {"type": "Warning", "reason": "Unhealthy",
                          "message": "Readiness probe failed: HTTP probe failed with statuscode: 503"}},
               weight=1_000, delay_ms=1_000),
        _stage("sre-pod-healed", "Pod",
               [_not_deleted(), {"key": ".spec.nodeName", "operator": "Exists"}, image_ok, _fault_is(HEALED),
                {"key": ready_is, "operator": "NotIn", "values": ["True"]}],
               {"statusTemplate": _POD_HEALED}, weight=1_000, delay_ms=1_000),
    ]


def kwok_config_documents(extra_tags: list[str] | None = None) -> list[dict[str, Any]]:
    """The documents of kwok's ``--config`` file: every stage. (kwok's options come from its command
    line: a KwokConfiguration document here would replace its defaults, parallelism included, with
    zeros.)"""
    return stages(extra_tags)


def kwok_config_yaml(extra_tags: list[str] | None = None) -> str:
    return yaml.safe_dump_all(kwok_config_documents(extra_tags), sort_keys=False, width=10_000)
