"""`KubernetesBackend`: the `Backend` protocol against a real Kubernetes API, in one namespace.

It deploys the app's manifests (`apps.manifests`), reads the cluster as ``kubectl get -o json``
would, and performs interventions the way kubectl does (rollback = copy an older ReplicaSet's pod
template back, scale through the scale subresource, restart = ``restartedAt`` annotation, ``set env``,
``set resources``, cordon + evict for a drain). Results and error messages are the twin's.

Faults that a kwok cluster can express are real cluster state, read back by the probes:

- pod-level faults ride on the pod annotation ``sremarathon.io/fault`` that the kwok stages act on:
  ``crashloop`` (crash effects, and env changes the twin's config model says crash: a missing
  address), ``oom`` (a memory limit below the service's working set, a memory hog over the limit),
  ``unready`` (readiness failure). Revision-bound ones are written into the Deployment's pod
  template, so a rollback or a fixed env/resources removes them as on a real cluster; direct ones
  are put on the running pods (``until_restart`` ones only on the pods present at injection, so a
  restart heals them) and taken off (``healed``) on revert;
- a bad image tag is just the image: the kwok stage keeps such pods in ``ImagePullBackOff``;
- scale to zero is a scale; a wrong selector (``no_endpoints``) patches the Service's selector;
- ``node_down`` labels the Node ``sremarathon.io/node-fault=notready``, which takes it out of kwok's
  selection: its simulated kubelet goes silent (no lease, no status), so the real node-lifecycle
  controller marks it Unknown, taints it unreachable and marks its pods not Ready; a drain evicts them
  (they stay Terminating on the silent node, as on a real cluster) and replacements start elsewhere.

Cluster-state metrics (the ``kube_*`` families) are read from the API into `store` at every tick
(`state_metrics`). Request-level telemetry (rates, errors, latencies, traces, logs) only exists where a real
application runs: on kwok it is *unavailable* (NaN in `service_health`, empty logs and traces, NaN
entry evidence), never made up. Time is wall-clock seconds since the backend started, so runs are
not reproducible (the Gymnasium ids are registered as nondeterministic).

>>> KubernetesBackend.request_metrics_available
False
>>> expressible(Effect(kind="crash", service="cartservice")), expressible(Effect(kind="latency", service="x", ms=5))
(True, False)
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from datetime import datetime, timezone
from typing import Any, Callable

from apps import load_app
from apps.manifests import container_json, manifests
from apps.spec import AppSpec
from faults.effects import Effect
from sremarathon_env.backends.arguments import KIND_PLURALS, env_key_error, merge_resources, patched, replicas_error
from sremarathon_env.backends.base import EntryEvidence, OpResult
from sremarathon_env.backends.kubernetes.rest import ApiError, KubeRest
from sremarathon_env.backends.kubernetes.stages import FAULT_ANNOTATION, HEALED, NODE_FAULT_LABEL

EFFECTS_ANNOTATION = "sremarathon.io/effects"
CHANGE_CAUSE = "kubernetes.io/change-cause"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
EXPRESSIBLE = {"crash", "not_ready", "pod_kill", "node_down", "no_endpoints", "memory_hog"}
_PLURAL = KIND_PLURALS


def expressible(effect: Effect) -> bool:
    """Whether a kwok cluster can show this effect as cluster state (others have no visible effect)."""
    return effect.kind in EXPRESSIBLE


def _iso_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ts(s: str | None) -> float | None:
    if not s:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def pod_ready(p: dict) -> bool:
    if p["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in p.get("status", {}).get("conditions", []))


class KubernetesBackend:
    """The live backend. ``deploy=False`` attaches to an app already deployed in ``namespace``."""

    request_metrics_available = False
    nondeterministic = True

    def __init__(self, app: AppSpec | str = "online-boutique", *, kubeconfig: str | None = None,
                 namespace: str | None = None, tick_s: float = 15.0, deploy: bool = True,
                 ready_timeout_s: float = 300.0, prometheus_url: str | None = None, realtime: bool = True):
        self.app: AppSpec = load_app(app) if isinstance(app, str) else app
        self.app_name = self.app.name
        self.namespace = namespace or self.app.namespace
        self.tick_s = float(tick_s)
        self.realtime = realtime
        self.prometheus_url = prometheus_url
        if kubeconfig is None:
            from sremarathon_env.backends.kubernetes.cluster import LocalCluster
            import os
            local = LocalCluster().kubeconfig_path
            kubeconfig = local if os.path.exists(local) else None
        self.api = KubeRest(kubeconfig)
        self.api_closed = False
        self._t0 = time.monotonic()
        self._epoch = time.time()
        self._tick = 0
        self._now = 0.0
        self._effects: dict[str, dict[str, Any]] = {}
        self._counter = 0
        self._meta: dict[tuple[str, str], dict[str, Any]] = {}
        self._files: dict[tuple[str, str], dict[str, str]] = {}
        self._selectors: dict[str, dict[str, str]] = {}
        from sremarathon_env.telemetry.store import MetricStore
        self.store = MetricStore(step_s=self.tick_s, capacity=int(5400 / self.tick_s) + 8)
        self.deploy_seconds: float | None = None
        if deploy:
            self.deploy_seconds = self.deploy_app(ready_timeout_s)

    # ================================================================== setup and teardown
    def deploy_app(self, timeout_s: float = 300.0) -> float:
        """(Re)create the namespace with the app's manifests; wait until every Deployment is available."""
        t0 = time.monotonic()
        self.delete_namespace(timeout_s)
        self.api.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": self.namespace, "labels": {"app.kubernetes.io/part-of": "sremarathon"}}})
        self.wait(lambda: self.api.get_or_none("serviceaccounts", self.namespace, "default") is not None, 120,
                  "the namespace's default ServiceAccount")
        plural = {"ConfigMap": "configmaps", "Service": "services", "Deployment": "deployments"}
        for obj in manifests(self.app, namespace=self.namespace):
            if obj["kind"] == "Deployment":
                tpl = obj["spec"]["template"]
                tpl["metadata"].setdefault("annotations", {})
                self._set_template_fault(obj["metadata"]["name"], tpl)
            self.api.create(plural[obj["kind"]], self.namespace, obj)
        self.wait(self.all_available, timeout_s, "every Deployment available")
        self._t0 = time.monotonic()
        self._epoch = time.time()
        self._now = 0.0
        self._tick = 0
        return round(time.monotonic() - t0, 2)

    def delete_namespace(self, timeout_s: float = 180.0) -> None:
        if self.api.get_or_none("namespaces", None, self.namespace) is None:
            return
        self.api.delete("namespaces", None, self.namespace)
        self.wait(lambda: self.api.get_or_none("namespaces", None, self.namespace) is None, timeout_s,
                  f"namespace {self.namespace} deleted")

    def close(self, delete_namespace: bool = True) -> None:
        """Revert every direct effect (node labels, cordons we made stay as the agent left them) and
        delete the namespace."""
        for h in sorted(self._effects):
            self.remove_effect(h)
        if delete_namespace:
            self.delete_namespace()
        self.api.close()
        self.api_closed = True

    def wait(self, cond: Callable[[], bool], timeout_s: float, what: str, period_s: float = 0.5) -> float:
        t0 = time.monotonic()
        while True:
            try:
                if cond():
                    return time.monotonic() - t0
            except ApiError:
                pass
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            self._reconcile()
            time.sleep(period_s)

    def all_available(self) -> bool:
        for d in self.api.items("deployments", self.namespace):
            st, want = d.get("status", {}), d["spec"].get("replicas", 1)
            if st.get("observedGeneration", 0) < d["metadata"].get("generation", 0):
                return False
            if st.get("readyReplicas", 0) < want or st.get("updatedReplicas", 0) < want or st.get("replicas", 0) != want:
                return False
        return True

    # ================================================================== clock
    @property
    def now(self) -> float:
        return max(self._now, time.monotonic() - self._t0) if self.realtime else self._now

    def advance_to(self, t: float) -> list[EntryEvidence]:
        """Wait (wall clock) until ``t``; one evidence record per tick, with NaN request counts:
        request-level traffic is unavailable on kwok."""
        if self.realtime:
            while time.monotonic() - self._t0 < t:
                self._reconcile()
                time.sleep(min(1.0, max(0.0, t - (time.monotonic() - self._t0))))
        self._reconcile()
        target = int(math.floor(t / self.tick_s + 1e-9))
        out = [EntryEvidence(k * self.tick_s, math.nan, math.nan, math.nan, math.nan)
               for k in range(self._tick + 1, target + 1)]
        if out or self.store.n_ticks == 0:
            self.scrape(target)
        self._tick = max(self._tick, target)
        self._now = max(self._now, float(t))
        return out

    def scrape(self, tick: int) -> None:
        """Write the cluster-state (kube_*) families at ``tick`` from the objects the API serves now."""
        from sremarathon_env.backends.kubernetes.state_metrics import write_state
        write_state(self.store, tick, self.namespace, self.api.items("deployments", self.namespace),
                    self.api.items("pods", self.namespace), self.api.items("nodes", None))

    # ================================================================== helpers
    def _dep(self, service: str) -> dict | None:
        if service not in self.app.service_names:
            return None
        return self.api.get_or_none("deployments", self.namespace, service)

    def _pods(self, service: str | None = None) -> list[dict]:
        params = {"labelSelector": f"app={service}"} if service else {}
        return [p for p in self.api.items("pods", self.namespace, **params)]

    def _rss(self, service: str) -> list[dict]:
        out = [rs for rs in self.api.items("replicasets", self.namespace, labelSelector=f"app={service}")
               if any(o.get("kind") == "Deployment" and o.get("name") == service
                      for o in rs["metadata"].get("ownerReferences", []))]
        return sorted(out, key=lambda rs: int(rs["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision", 0)))

    @staticmethod
    def _revision(obj: dict) -> int:
        return int(obj["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision", 0))

    @staticmethod
    def _hash(rs: dict) -> str:
        return rs["metadata"].get("labels", {}).get("pod-template-hash", "")

    def _env(self, tpl: dict) -> dict[str, str]:
        c = tpl["spec"]["containers"][0]
        return {e["name"]: e.get("value", "") for e in c.get("env", []) if "valueFrom" not in e}

    def _res(self, tpl: dict) -> dict[str, int | None]:
        from faults.realise import _qty_m, _qty_mi
        r = tpl["spec"]["containers"][0].get("resources", {})
        lim, req = r.get("limits", {}) or {}, r.get("requests", {}) or {}
        conv = lambda f, v: None if v is None else int(round(f(v)))  # noqa: E731
        return {"cpu_request_m": conv(_qty_m, req.get("cpu")), "cpu_limit_m": conv(_qty_m, lim.get("cpu")),
                "mem_request_mi": conv(_qty_mi, req.get("memory")), "mem_limit_mi": conv(_qty_mi, lim.get("memory"))}

    def _cm_values(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for cm in sorted(self.api.items("configmaps", self.namespace), key=lambda c: c["metadata"]["name"]):
            if cm["metadata"]["name"] != "kube-root-ca.crt":
                out.update(cm.get("data") or {})
        return out

    def _template_fault(self, service: str, tpl: dict) -> str | None:
        """The pod-level fault a pod template implies: revision-bound effects it carries, env the
        twin's config model says crashes, a memory limit under the working set."""
        from sremarathon_env.backends.sim.faulthook import config_faults
        svc = self.app.service(service)
        handles = [h for h in tpl["metadata"].get("annotations", {}).get(EFFECTS_ANNOTATION, "").split(",") if h]
        kinds = [self._effects[h]["effect"] for h in handles if h in self._effects]
        if any(e.kind == "crash" and e.reason == "OOMKilled" for e in kinds):
            return "oom"
        if any(e.kind == "crash" for e in kinds):
            return "crashloop"
        for f in config_faults(self.app, service, self._env(tpl), self._cm_values() if svc.knobs else {}):
            if f.crash is not None or f.kind == "liveness":
                return "oom" if f.crash is not None and f.crash.reason == "OOMKilled" else "crashloop"
        lim = self._res(tpl)["mem_limit_mi"]
        if lim is not None and lim < svc.behaviour.mem_base_mi:
            return "oom"
        if any(e.kind == "not_ready" for e in kinds):
            return "unready"
        return None

    def _set_template_fault(self, service: str, tpl: dict) -> None:
        ann = tpl["metadata"].setdefault("annotations", {})
        fault = self._template_fault(service, tpl)
        if fault:
            ann[FAULT_ANNOTATION] = fault
        else:
            ann.pop(FAULT_ANNOTATION, None)
        if not ann:
            tpl["metadata"].pop("annotations")

    def _update_template(self, service: str, mutate: Callable[[dict], None], cause: str) -> dict:
        """GET, mutate the pod template, recompute its fault, PUT (retried on conflicts); waits until
        the controller has observed it and returns the Deployment."""
        for _ in range(8):
            dep = self.api.get("deployments", self.namespace, service)
            tpl = dep["spec"]["template"]
            before = copy.deepcopy(tpl)
            mutate(tpl)
            self._set_template_fault(service, tpl)
            if tpl == before:
                return dep
            dep["metadata"].setdefault("annotations", {})[CHANGE_CAUSE] = cause
            try:
                new = self.api.replace("deployments", self.namespace, service, dep)
            except ApiError as e:
                if e.status == 409:
                    continue
                raise
            gen = new["metadata"]["generation"]
            self.wait(lambda: self.api.get("deployments", self.namespace, service).get("status", {})
                      .get("observedGeneration", 0) >= gen, 60, f"deployment {service} observed")
            return self.api.get("deployments", self.namespace, service)
        raise ApiError(409, {"message": "too many conflicts"}, f"update deployment {service}")

    def _current_rs(self, service: str, dep: dict) -> dict | None:
        rev = self._revision(dep)
        for _ in range(40):
            for rs in self._rss(service):
                if self._revision(rs) == rev:
                    return rs
            time.sleep(0.25)
        return None

    def _initial_meta(self, service: str) -> dict[str, Any]:
        from apps.sources import initial_history
        hist = initial_history(self.app, service)
        last = hist[-1] if hist else {"sha": "0" * 40, "author": "unknown", "message": "initial", "t": -3600.0}
        return {"sha": last["sha"], "author": last["author"], "message": last["message"], "t": float(last["t"]),
                "diff": "", "change": "build"}

    def files_of(self, service: str, rs_hash: str | None) -> dict[str, str]:
        hit = self._files.get((service, rs_hash or ""))
        if hit is None:
            from apps.sources import initial_tree
            hit = self._files.setdefault((service, ""), initial_tree(self.app, service))
        return hit

    def _current_hash(self, service: str) -> str | None:
        dep = self._dep(service)
        if dep is None:
            return None
        rs = self._current_rs(service, dep)
        return self._hash(rs) if rs else None

    # ================================================================== fault hook
    def apply_effect(self, effect: Effect) -> str:
        if effect.bind == "revision":
            raise ValueError("revision-bound effects are delivered with deploy(..., effects=[...])")
        if effect.service is not None and effect.service not in self.app.service_names:
            raise ValueError(f"effect targets unknown service {effect.service!r}")
        if effect.node is not None and effect.node not in {n.name for n in self.app.topology.nodes}:
            raise ValueError(f"effect targets unknown node {effect.node!r}")
        h = self._register(effect)
        rec = self._effects[h]
        if not expressible(effect):
            return h
        if effect.kind == "pod_kill":
            for p in self._pods(effect.service):
                self.api.delete("pods", self.namespace, p["metadata"]["name"])
        elif effect.kind == "node_down":
            self.api.patch("nodes", None, effect.node, {"metadata": {"labels": {NODE_FAULT_LABEL: "notready"}}})
        elif effect.kind == "no_endpoints":
            svc = self.api.get("services", self.namespace, effect.service)
            self._selectors.setdefault(effect.service, dict(svc["spec"].get("selector") or {}))
            self.api.patch("services", self.namespace, effect.service,
                           {"spec": {"selector": {"app": f"{effect.service}-unmatched"}}})
        else:
            value = self._pod_fault_value(effect)
            if value is not None:
                rec["value"] = value
                if effect.until_restart:
                    rec["pods"] = sorted(p["metadata"]["name"] for p in self._pods(effect.service)
                                         if not p["metadata"].get("deletionTimestamp"))
                self._reconcile()
        return h

    def _register(self, effect: Effect, bound: bool = False) -> str:
        self._counter += 1
        h = f"k{self._counter}"
        self._effects[h] = {"effect": effect, "since": self.now, "annotated": set(), "bound": bound}
        return h

    def _pod_fault_value(self, e: Effect) -> str | None:
        if e.kind == "crash":
            return "oom" if e.reason == "OOMKilled" else "crashloop"
        if e.kind == "not_ready":
            return "unready"
        if e.kind == "memory_hog":
            dep = self._dep(e.service)
            lim = self._res(dep["spec"]["template"])["mem_limit_mi"] if dep else None
            base = self.app.service(e.service).behaviour.mem_base_mi
            return "oom" if lim is not None and base + e.mi > lim else None
        return None

    def _reconcile(self) -> None:
        """Keep direct pod effects on their pods (new pods of the service get them too, except for
        ``until_restart`` effects, which end when their pods are gone)."""
        by_service: dict[str, list[dict]] = {}
        for h in sorted(self._effects):
            rec = self._effects[h]
            e = rec["effect"]
            if rec["bound"] or "value" not in rec:
                continue
            pods = by_service.get(e.service)
            if pods is None:
                pods = by_service[e.service] = self._pods(e.service)
            live = {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}
            targets = [n for n in rec.get("pods", sorted(live)) if n in live]
            if "pods" in rec and not targets:
                self.remove_effect(h)
                continue
            for name in targets:
                cur = live[name]["metadata"].get("annotations", {}).get(FAULT_ANNOTATION)
                if cur in (None, HEALED) or (cur == "unready" and rec["value"] != "unready"):
                    self._annotate_pod(name, rec["value"])
                    rec["annotated"].add(name)

    def _annotate_pod(self, name: str, value: str | None) -> None:
        try:
            self.api.patch("pods", self.namespace, name, {"metadata": {"annotations": {FAULT_ANNOTATION: value}}})
        except ApiError as e:
            if e.status != 404:
                raise

    def remove_effect(self, handle: str) -> None:
        rec = self._effects.pop(handle, None)
        if rec is None:
            return
        e = rec["effect"]
        if not expressible(e) or rec["bound"]:
            return
        if e.kind == "node_down":
            if not any(r["effect"].kind == "node_down" and r["effect"].node == e.node for r in self._effects.values()):
                self.api.patch("nodes", None, e.node, {"metadata": {"labels": {NODE_FAULT_LABEL: None}}})
                for p in self._pods():
                    ann = p["metadata"].get("annotations", {})
                    if p["spec"].get("nodeName") == e.node and ann.get(FAULT_ANNOTATION) in (None, HEALED):
                        self._annotate_pod(p["metadata"]["name"], HEALED)
        elif e.kind == "no_endpoints":
            sel = self._selectors.pop(e.service, {"app": e.service})
            self.api.patch("services", self.namespace, e.service, {"spec": {"selector": sel}})
        elif "value" in rec:
            for p in self._pods(e.service):
                name = p["metadata"]["name"]
                if name in rec["annotated"] and p["metadata"].get("annotations", {}).get(FAULT_ANNOTATION) == rec["value"]:
                    self._annotate_pod(name, HEALED)

    def effect_active(self, handle: str) -> bool:
        return handle in self._effects

    # ================================================================== deploys and interventions
    def deploy(self, service: str, *, message: str, author: str, files: dict[str, str] | None = None,
               env: dict[str, str | None] | None = None, image_tag: str | None = None,
               effects: list[Effect] = (), noise: bool = False) -> OpResult:
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        for e in effects:
            if e.bind != "revision":
                return OpResult(False, f"deploy effects must be revision-bound, got bind={e.bind!r}")
        cur_rs = self._current_rs(service, dep)
        cur_hash = self._hash(cur_rs) if cur_rs else ""
        cur_files = self.files_of(service, cur_hash)
        new_files = patched(cur_files, files)
        c0 = dep["spec"]["template"]["spec"]["containers"][0]
        image, tag = c0["image"].rsplit(":", 1) if ":" in c0["image"].rsplit("/", 1)[-1] else (c0["image"], "latest")
        parent = self._meta.get((service, cur_hash), self._initial_meta(service))["sha"]
        body = json.dumps([parent, author, message, self.now, new_files, env, image_tag], sort_keys=True, default=str)
        sha = hashlib.sha1(body.encode()).hexdigest()
        if image_tag is not None:
            tag = image_tag
        elif new_files != cur_files:
            tag = f"{self.app.service(service).tag.split('-')[0]}-{sha[:7]}"
        handles = []
        for e in effects:
            h = self._register(e, bound=True)
            handles.append(h)
        kept = [h for h in dep["spec"]["template"]["metadata"].get("annotations", {}).get(EFFECTS_ANNOTATION, "").split(",")
                if h in self._effects and _marker_holds(self._effects[h]["effect"], new_files, env, self._env(dep["spec"]["template"]))]

        def mutate(tpl: dict) -> None:
            c = tpl["spec"]["containers"][0]
            c["image"] = f"{image}:{tag}"
            cur_env = {x["name"]: x for x in c.get("env", [])}
            for k, v in (env or {}).items():
                if v is None:
                    cur_env.pop(k, None)
                else:
                    cur_env[k] = {"name": k, "value": str(v)}
            c["env"] = [cur_env[k] for k in sorted(cur_env)]
            ann = tpl["metadata"].setdefault("annotations", {})
            all_h = kept + handles
            if all_h:
                ann[EFFECTS_ANNOTATION] = ",".join(all_h)
            else:
                ann.pop(EFFECTS_ANNOTATION, None)

        cause = message if author != "kubectl" else message
        new = self._update_template(service, mutate, cause)
        rs = self._current_rs(service, new)
        if rs is None:
            return OpResult(False, f"deployment.apps/{service}: no ReplicaSet for revision {self._revision(new)}")
        h = self._hash(rs)
        kind = "build" if files else ("image" if image_tag else "config")
        if h == cur_hash:
            return OpResult(True, f"deployment.apps/{service} unchanged", {"revision": self._revision(rs), "effect_handles": handles})
        self._meta[(service, h)] = {"sha": sha, "author": author, "message": message, "t": self.now, "diff": "",
                                     "change": kind, "noise": bool(noise)}
        self._files[(service, h)] = new_files
        return OpResult(True, f"deployment.apps/{service} revision {self._revision(rs)} rolling out ({rs['metadata']['name']})",
                        {"revision": self._revision(rs), "replicaset": rs["metadata"]["name"], "image": f"{image}:{tag}",
                         "sha": sha, "effect_handles": handles})

    def rollback(self, service: str, revision: int | None = None) -> OpResult:
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        rss = self._rss(service)
        cur_rev = self._revision(dep)
        if revision is None:
            older = [rs for rs in rss if self._revision(rs) < cur_rev]
            if not older:
                return OpResult(False, f"no rollout history found for deployment {service!r}")
            target = older[-1]
        else:
            try:
                revision = int(revision)
            except (TypeError, ValueError):
                return OpResult(False, f"revision must be an integer, got {revision!r}")
            found = [rs for rs in rss if self._revision(rs) == revision]
            if not found:
                return OpResult(False, f"unable to find specified revision {revision} in history")
            target = found[0]
        old_rev = self._revision(target)
        if old_rev == cur_rev:
            return OpResult(True, f"deployment.apps/{service} skipped rollback (current template already matches revision {cur_rev})",
                            {"revision": cur_rev})
        src = copy.deepcopy(target["spec"]["template"])
        src["metadata"].get("labels", {}).pop("pod-template-hash", None)

        def mutate(tpl: dict) -> None:
            tpl.clear()
            tpl.update(src)

        new = self._update_template(service, mutate, f"rollback to revision {old_rev}")
        rs = self._current_rs(service, new)
        now_rev = self._revision(rs) if rs else self._revision(new)
        return OpResult(True, f"deployment.apps/{service} rolled back to revision {old_rev} (now revision {now_rev})",
                        {"revision": now_rev, "from_revision": old_rev, "replicaset": target["metadata"]["name"]})

    def scale(self, service: str, replicas: int) -> OpResult:
        if self._dep(service) is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        if replicas_error(replicas):
            return OpResult(False, replicas_error(replicas))
        self.api.patch("deployments", self.namespace, service, {"spec": {"replicas": int(replicas)}}, sub="scale")
        return OpResult(True, f"deployment.apps/{service} scaled to {replicas}", {"replicas": int(replicas)})

    def restart(self, service: str) -> OpResult:
        if self._dep(service) is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        stamp = _iso_now()

        def mutate(tpl: dict) -> None:
            tpl["metadata"].setdefault("annotations", {})[RESTARTED_AT] = stamp

        new = self._update_template(service, mutate, f"kubectl rollout restart deployment/{service}")
        rs = self._current_rs(service, new)
        if rs is not None:
            prev = self._meta.get((service, ""), self._initial_meta(service))
            self._meta[(service, self._hash(rs))] = dict(prev, message=f"kubectl rollout restart deployment/{service}",
                                                          author="kubectl", t=self.now, change="restart")
        return OpResult(True, f"deployment.apps/{service} restarted",
                        {"revision": self._revision(rs) if rs else self._revision(new),
                         "replicaset": rs["metadata"]["name"] if rs else None})

    def set_config(self, target: str, key: str, value: str | None) -> OpResult:
        flags_cm = self.app.flags_config_map
        if flags_cm is not None and target in (flags_cm, "flagd"):
            flag = self._flag(key)
            if flag is None:
                return OpResult(False, f"unknown feature flag {key!r}; known: {', '.join(f.name for f in self.app.flags)}")
            if value is None or value not in flag.variants:
                return OpResult(False, f"unknown variant {value!r} for flag {flag.name!r}; variants: {', '.join(flag.variants)}")
            self.api.patch("configmaps", self.namespace, flags_cm, {"data": {flag.name: value}})
            return OpResult(True, f"configmap/{flags_cm} {flag.name} defaultVariant={value}", {"flag": flag.name, "variant": value})
        cms = {c["metadata"]["name"] for c in self.api.items("configmaps", self.namespace)} - {"kube-root-ca.crt"}
        if target in cms:
            self.api.patch("configmaps", self.namespace, target, {"data": {key: None if value is None else str(value)}})
            return OpResult(True, f"configmap/{target} {key} updated", {"key": key})
        if self._dep(target) is None:
            return OpResult(False, f"unknown config target {target!r}: not a deployment or config map")
        if env_key_error(key):
            return OpResult(False, env_key_error(key))
        shown = f"{key}-" if value is None else f"{key}={value}"
        return self.deploy(target, message=f"kubectl set env deployment/{target} {shown}", author="kubectl",
                           env={key: value})

    def set_resources(self, service: str, *, cpu_request_m: int | None = None, cpu_limit_m: int | None = None,
                      mem_request_mi: int | None = None, mem_limit_mi: int | None = None) -> OpResult:
        dep = self._dep(service)
        if dep is None:
            return OpResult(False, f'deployments.apps "{service}" not found')
        res, changes, error = merge_resources(self._res(dep["spec"]["template"]), cpu_request_m=cpu_request_m,
                                              cpu_limit_m=cpu_limit_m, mem_request_mi=mem_request_mi,
                                              mem_limit_mi=mem_limit_mi)
        if error:
            return OpResult(False, error)
        svc = self.app.service(service)

        def mutate(tpl: dict) -> None:
            tpl["spec"]["containers"][0]["resources"] = container_json(svc, resources=res)["resources"]

        cause = f"kubectl set resources deployment/{service} " + ",".join(f"{k}={v}" for k, v in sorted(changes.items()))
        new = self._update_template(service, mutate, cause)
        rs = self._current_rs(service, new)
        return OpResult(True, f"deployment.apps/{service} resource requirements updated",
                        {"revision": self._revision(rs) if rs else self._revision(new)})

    def drain_node(self, node: str) -> OpResult:
        if self.api.get_or_none("nodes", None, node) is None:
            return OpResult(False, f'nodes "{node}" not found')
        self.api.patch("nodes", None, node, {"spec": {"unschedulable": True}})
        n = 0
        for p in self._pods():
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp"):
                name = p["metadata"]["name"]
                self.api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods/{name}/eviction",
                                 body={"apiVersion": "policy/v1", "kind": "Eviction",
                                       "metadata": {"name": name, "namespace": self.namespace}}, ok=(200, 201, 404))
                n += 1
        return OpResult(True, f"node/{node} cordoned, {n} pod(s) evicted", {"evicted": n})

    def uncordon_node(self, node: str) -> OpResult:
        if self.api.get_or_none("nodes", None, node) is None:
            return OpResult(False, f'nodes "{node}" not found')
        self.api.patch("nodes", None, node, {"spec": {"unschedulable": None}})
        return OpResult(True, f"node/{node} uncordoned")

    # ================================================================== reads
    def k8s_get(self, kind: str, name: str | None = None) -> list[dict[str, Any]]:
        plural = _PLURAL.get(str(kind).lower())
        if plural is None:
            return [{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                     "message": f'the server doesn\'t have a resource type "{kind}"'}]
        ns = None if plural == "nodes" else self.namespace
        items = self.api.items(plural, ns)
        if plural == "configmaps":
            items = [i for i in items if i["metadata"]["name"] != "kube-root-ca.crt"]
        if name is not None:
            items = [i for i in items if i["metadata"]["name"] == name]
        return sorted(items, key=lambda i: i["metadata"]["name"])

    def events(self, since: float, until: float) -> list[dict[str, Any]]:
        out = []
        for ev in self.api.items("events", self.namespace):
            stamp = _ts(ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp"))
            t = (stamp - self._epoch) if stamp is not None else 0.0
            if since <= t <= until:
                out.append({**ev, "t": t})
        out.sort(key=lambda e: (e["t"], e["metadata"]["name"]))
        return out

    def logs(self, service: str, since: float, until: float, pattern: str | None = None, limit: int = 100) -> list[str]:
        return []  # no container runs on kwok: logs are unavailable, not invented

    def traces(self, service: str | None, endpoint: str | None, since: float, until: float,
               errors_only: bool = False, limit: int = 20) -> list[dict[str, Any]]:
        return []

    def deploy_history(self, service: str) -> list[dict[str, Any]]:
        dep = self._dep(service)
        if dep is None:
            return []
        cur = self._revision(dep)
        ready_by_hash: dict[str, int] = {}
        for p in self._pods(service):
            if pod_ready(p):
                h = p["metadata"].get("labels", {}).get("pod-template-hash", "")
                ready_by_hash[h] = ready_by_hash.get(h, 0) + 1
        out = []
        for i, rs in enumerate(self._rss(service)):
            h = self._hash(rs)
            meta = self._meta.get((service, h)) or self._initial_meta(service)
            created = _ts(rs["metadata"].get("creationTimestamp")) or self._epoch
            out.append({"revision": self._revision(rs), "replicaset": rs["metadata"]["name"],
                        "image": rs["spec"]["template"]["spec"]["containers"][0]["image"],
                        "sha": meta.get("sha"), "author": meta.get("author"),
                        "message": meta.get("message") if (service, h) in self._meta or i == 0
                        else rs["metadata"].get("annotations", {}).get(CHANGE_CAUSE, ""),
                        "time": rs["metadata"].get("creationTimestamp"), "t": meta.get("t", created - self._epoch),
                        "change": meta.get("change", "build"), "diff": meta.get("diff", ""),
                        "current": self._revision(rs) == cur, "ready": ready_by_hash.get(h, 0)})
        return out

    def source_files(self, service: str) -> list[str]:
        if service not in self.app.service_names:
            return []
        return sorted(self.files_of(service, self._current_hash(service)))

    def read_source(self, service: str, path: str) -> str | None:
        if service not in self.app.service_names:
            return None
        return self.files_of(service, self._current_hash(service)).get(path)

    # ================================================================== health
    def service_health(self, service: str) -> dict[str, float]:
        dep = self._dep(service)
        if dep is None:
            return {}
        live = [p for p in self._pods(service) if not p["metadata"].get("deletionTimestamp")]
        restarts = sum(cs.get("restartCount", 0) for p in live for cs in p.get("status", {}).get("containerStatuses", []))
        nan = math.nan
        return {"ready": float(sum(pod_ready(p) for p in live)), "desired": float(dep["spec"].get("replicas", 1)),
                "restarts": float(restarts), "error_ratio": nan, "p95_ms": nan, "rate": nan, "cpu_util": nan,
                "mem_util": nan, "endpoints": float(self._ready_endpoints(service))}

    def _ready_endpoints(self, service: str) -> int:
        n = 0
        for s in self.api.items("endpointslices", self.namespace, labelSelector=f"kubernetes.io/service-name={service}"):
            for ep in s.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready"):
                    n += 1
        return n

    def path_health(self, path: str | None = None) -> dict[str, float]:
        return {"rate": math.nan, "error_ratio": math.nan, "p95_ms": math.nan}

    def edge_health(self, caller: str, callee: str) -> dict[str, float]:
        return {"rate": math.nan, "error_ratio": math.nan, "p95_ms": math.nan}

    def deployment_spec(self, service: str) -> dict[str, Any] | None:
        """The Deployment's current template in the twin's typed shape (None for an unknown service)."""
        dep = self._dep(service)
        if dep is None:
            return None
        tpl = dep["spec"]["template"]
        image = tpl["spec"]["containers"][0]["image"]
        repo, tag = image.rsplit(":", 1) if ":" in image.rsplit("/", 1)[-1] else (image, "latest")
        rs = next((r for r in self._rss(service) if self._revision(r) == self._revision(dep)), None)
        return {"image": image, "repository": repo, "tag": tag, "env": self._env(tpl), "resources": self._res(tpl),
                "replicas": dep["spec"].get("replicas", 1), "revision": self._revision(dep),
                "template_hash": self._hash(rs) if rs else None}

    def pods_on_node(self, node: str) -> int:
        return sum(1 for p in self._pods() if p["spec"].get("nodeName") == node
                   and not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") in ("Running", "Pending"))

    def env_of(self, service: str) -> dict[str, str]:
        dep = self._dep(service)
        return {} if dep is None else self._env(dep["spec"]["template"])

    def _flag(self, name: str):
        for f in self.app.flags:
            if name == f.name or name in f.aliases:
                return f
        return None

    def flag_variant(self, flag: str) -> str | None:
        f = self._flag(flag)
        if f is None or not self.app.flags_config_map:
            return None
        cm = self.api.get_or_none("configmaps", self.namespace, self.app.flags_config_map)
        return None if cm is None else (cm.get("data") or {}).get(f.name)

    def serving_revisions(self, service: str) -> dict[int, int]:
        if self._dep(service) is None:
            return {}
        rev_of = {self._hash(rs): self._revision(rs) for rs in self._rss(service)}
        out: dict[int, int] = {}
        for p in self._pods(service):
            if pod_ready(p):
                r = rev_of.get(p["metadata"].get("labels", {}).get("pod-template-hash", ""))
                if r is not None:
                    out[r] = out.get(r, 0) + 1
        return out

    def state_digest(self) -> str:
        deps = {}
        for d in self.api.items("deployments", self.namespace):
            name = d["metadata"]["name"]
            tpl = copy.deepcopy(d["spec"]["template"])
            obs: dict[str, int] = {}
            for p in self._pods(name):
                if p["metadata"].get("deletionTimestamp"):
                    continue
                cs = (p.get("status", {}).get("containerStatuses") or [{}])[0]
                key = "|".join([p["metadata"].get("labels", {}).get("pod-template-hash", ""), p["status"].get("phase", ""),
                                (cs.get("state", {}).get("waiting") or {}).get("reason", ""), str(pod_ready(p))])
                obs[key] = obs.get(key, 0) + 1
            deps[name] = {"replicas": d["spec"].get("replicas"), "template": tpl, "pods": dict(sorted(obs.items()))}
        nodes = [[n["metadata"]["name"], pod_ready(n), bool(n["spec"].get("unschedulable"))]
                 for n in self.api.items("nodes", None)]
        cms = {c["metadata"]["name"]: dict(sorted((c.get("data") or {}).items()))
               for c in self.api.items("configmaps", self.namespace) if c["metadata"]["name"] != "kube-root-ca.crt"}
        state = {"deployments": dict(sorted(deps.items())), "nodes": sorted(nodes), "config_maps": dict(sorted(cms.items()))}
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()

    # ================================================================== telemetry
    def query_metrics(self, query: str, t: float | None = None) -> dict[str, Any]:
        """Instant PromQL query against a real Prometheus scraping the cluster (``prometheus_url``);
        without one, metrics are unavailable."""
        if not self.prometheus_url:
            return {"status": "error", "errorType": "unavailable",
                    "error": "no Prometheus scrapes this cluster (kwok has no application metrics)"}
        import httpx
        params = {"query": query}
        if t is not None:
            params["time"] = f"{self._epoch + t:.3f}"
        r = httpx.get(f"{self.prometheus_url.rstrip('/')}/api/v1/query", params=params, timeout=10.0)
        return r.json()


def _marker_holds(e: Effect, files: dict[str, str], env_change: dict | None, cur_env: dict[str, str]) -> bool:
    if e.marker is None:
        return False
    if e.marker.source_contains is not None:
        path, snippet = e.marker.source_contains
        return snippet in files.get(path, "")
    key, value = e.marker.env_equals
    env = dict(cur_env)
    for k, v in (env_change or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env.get(key) == value
