"""A small REST client for the Kubernetes API: kubeconfig loading by the ``kubernetes`` package,
requests by httpx, answers as the API's own JSON (what ``kubectl get -o json`` prints).

>>> resource_path("deployments", "shop")
'/apis/apps/v1/namespaces/shop/deployments'
>>> resource_path("nodes", None, "node-a1")
'/api/v1/nodes/node-a1'
"""

from __future__ import annotations

from typing import Any

#: plural -> (API prefix, namespaced, Kind)
RESOURCES: dict[str, tuple[str, bool, str]] = {
    "pods": ("/api/v1", True, "Pod"),
    "services": ("/api/v1", True, "Service"),
    "endpoints": ("/api/v1", True, "Endpoints"),
    "configmaps": ("/api/v1", True, "ConfigMap"),
    "resourcequotas": ("/api/v1", True, "ResourceQuota"),
    "events": ("/api/v1", True, "Event"),
    "serviceaccounts": ("/api/v1", True, "ServiceAccount"),
    "nodes": ("/api/v1", False, "Node"),
    "namespaces": ("/api/v1", False, "Namespace"),
    "deployments": ("/apis/apps/v1", True, "Deployment"),
    "replicasets": ("/apis/apps/v1", True, "ReplicaSet"),
    "endpointslices": ("/apis/discovery.k8s.io/v1", True, "EndpointSlice"),
}

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any, what: str):
        self.status = status
        self.body = body
        msg = body.get("message") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{what}: {status} {msg}")


def tls_context(ca: str | None, cert: str | None, key: str | None, verify: bool = True):
    """An SSL context trusting ``ca`` (or the system store) and presenting ``cert``/``key`` if given."""
    import ssl
    ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def resource_path(plural: str, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
    prefix, namespaced, _ = RESOURCES[plural]
    p = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced else f"{prefix}/{plural}"
    if name:
        p += f"/{name}"
    if sub:
        p += f"/{sub}"
    return p


class KubeRest:
    """Authenticated access to one cluster, as its kubeconfig says."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, timeout_s: float = 20.0):
        import httpx
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                                persist_config=False)
        headers = {}
        token = (cfg.api_key or {}).get("authorization")
        if token:
            prefix = (cfg.api_key_prefix or {}).get("authorization")
            headers["Authorization"] = f"{prefix} {token}" if prefix and not token.startswith(prefix) else token
        self.host = cfg.host
        self.http = httpx.Client(base_url=cfg.host, verify=tls_context(cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file,
                                                                     bool(cfg.verify_ssl)),
                                 headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
                content_type: str = "application/json", ok: tuple[int, ...] = (200, 201, 202)) -> Any:
        import json
        kw: dict[str, Any] = {"params": params}
        if body is not None:
            kw["content"] = json.dumps(body)
            kw["headers"] = {"Content-Type": content_type}
        r = self.http.request(method, path, **kw)
        try:
            data = r.json()
        except ValueError:
            data = r.text
        if r.status_code not in ok:
            raise ApiError(r.status_code, data, f"{method} {path}")
        return data

    # -- conveniences ----------------------------------------------------------------------
    def get(self, plural: str, namespace: str | None, name: str | None = None, **params: Any) -> Any:
        return self.request("GET", resource_path(plural, namespace, name), params=params or None)

    def get_or_none(self, plural: str, namespace: str | None, name: str) -> dict | None:
        try:
            return self.get(plural, namespace, name)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def items(self, plural: str, namespace: str | None, **params: Any) -> list[dict[str, Any]]:
        """List items, each with its ``apiVersion`` and ``kind`` (a list answer leaves them out)."""
        data = self.get(plural, namespace, **params)
        api = RESOURCES[plural][0].split("/", 2)
        api_version = "v1" if api[1] == "api" else "/".join(api[2:])
        kind = RESOURCES[plural][2]
        return [{"apiVersion": api_version, "kind": kind, **i} for i in data.get("items", [])]

    def create(self, plural: str, namespace: str | None, obj: dict) -> Any:
        return self.request("POST", resource_path(plural, namespace), body=obj)

    def replace(self, plural: str, namespace: str | None, name: str, obj: dict) -> Any:
        return self.request("PUT", resource_path(plural, namespace, name), body=obj)

    def patch(self, plural: str, namespace: str | None, name: str, body: Any, *, sub: str | None = None,
              content_type: str = MERGE) -> Any:
        return self.request("PATCH", resource_path(plural, namespace, name, sub), body=body, content_type=content_type)

    def delete(self, plural: str, namespace: str | None, name: str, body: dict | None = None) -> Any:
        return self.request("DELETE", resource_path(plural, namespace, name), body=body, ok=(200, 202, 404))
