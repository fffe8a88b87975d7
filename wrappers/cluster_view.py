"""What the RL view reads of the cluster between steps: the state a ``kubectl get`` / deploy-history /
health read would show, gathered without spending the agent's budget (it drives the action mask and
the macro actions' arguments, never ground truth: no schedule, no fault handles).

Only the embedded twin is supported for now (it reads the twin's Kubernetes-shaped state directly,
which is what ``kubectl_get`` renders); a live backend would answer the same questions from its API.

>>> from sremarathon_env.marathon import Marathon, MarathonConfig
>>> m = Marathon(MarathonConfig(injection_s=600, observation_s=240)); _ = m.start()
>>> cv = ClusterView(m.backend, m.app)
>>> cv.desired_replicas("frontend") >= 1, cv.cordoned("node-a1")
(True, False)
"""

from __future__ import annotations

from typing import Any

from apps.spec import AppSpec


class ClusterView:
    def __init__(self, backend: Any, app: AppSpec):
        if not hasattr(backend, "cluster"):
            raise NotImplementedError("the RL view needs the embedded 'sim' backend in this build")
        self.b = backend
        self.app = app
        self.spec = {s.name: s for s in app.services}

    # -- deployments -------------------------------------------------------------------------------
    def _dep(self, service: str):
        return self.b.cluster.deployments.get(service)

    def desired_replicas(self, service: str) -> int:
        d = self._dep(service)
        return 0 if d is None else int(d.replicas)

    def env(self, service: str) -> dict[str, str]:
        d = self._dep(service)
        return {} if d is None else dict(d.current.template["env"])

    def resources(self, service: str) -> dict[str, int | None]:
        d = self._dep(service)
        return {} if d is None else dict(d.current.template["resources"])

    def env_drift(self, service: str) -> list[str]:
        """Env keys whose value differs from the app model's (missing or extra keys included), sorted."""
        spec_env = self.spec[service].env
        cur = self.env(service)
        return sorted(k for k in set(spec_env) | set(cur) if spec_env.get(k) != cur.get(k))

    def resource_drift(self, service: str, kind: str) -> bool:
        """True when the current cpu (``kind='cpu'``) or memory limit/request differs from the model's."""
        r = self.resources(service)
        s = self.spec[service].resources
        keys = ("cpu_request_m", "cpu_limit_m") if kind == "cpu" else ("mem_request_mi", "mem_limit_mi")
        return any(r.get(k) != getattr(s, k) for k in keys)

    def revisions(self, service: str) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """(revision, meta, template) of every revision, oldest first."""
        d = self._dep(service)
        if d is None:
            return []
        return [(rs.revision, self.b.meta_of(rs), rs.template) for rs in sorted(d.rss, key=lambda r: r.revision)]

    def _last_change_rs(self, service: str):
        """(ReplicaSet, previous ReplicaSet, kind, meta) of `last_change`'s revision, or None."""
        d = self._dep(service)
        if d is None or len(d.rss) < 2:
            return None
        revs = sorted(d.rss, key=lambda r: r.revision)
        cur_rev = d.current.revision
        for i in range(len(revs) - 1, 0, -1):
            rs = revs[i]
            if rs.revision > cur_rev:
                continue
            meta = self.b.meta_of(rs)
            kind = meta.get("kind", "build")
            if kind == "restart" or float(meta.get("t", -1.0)) < 0:
                continue
            return rs, revs[i - 1], kind, meta
        return None

    def last_change(self, service: str) -> tuple[int, int, str, str] | None:
        """The latest non-restart revision made during the marathon, as (revision, previous revision,
        kind, artifact), or None. ``artifact`` names what changed: a source file, an env key, the image
        or a resource limit, in the forms the alias tables use (``svc:path``, ``svc:KEY``...)."""
        ch = self._last_change_rs(service)
        if ch is None:
            return None
        rs, prev, kind, meta = ch
        return rs.revision, prev.revision, kind, self._artifact(service, kind, meta, rs.template, prev.template)

    def last_change_kind(self, service: str) -> tuple[int, int, str] | None:
        """`last_change` without the artifact (which may need the revision's diff rendered): (revision,
        previous revision, kind), or None."""
        ch = self._last_change_rs(service)
        return None if ch is None else (ch[0].revision, ch[1].revision, ch[2])

    def summary(self, service: str) -> tuple[bool, bool, bool, int, int, tuple[int, int, str] | None,
                                             float | None]:
        """(``bool(env_drift)``, ``resource_drift`` cpu, ``resource_drift`` memory, `desired_replicas`, how many of
        `revisions` have a time >= 0 (made during the marathon), `last_change_kind`, that revision's time) in one
        pass over the deployment (one sort, each revision's metadata read once).

        >>> from sremarathon_env.marathon import Marathon, MarathonConfig
        >>> m = Marathon(MarathonConfig(injection_s=600, observation_s=240)); _ = m.start()
        >>> cv = ClusterView(m.backend, m.app)
        >>> all(cv.summary(s) == cv._summary_plain(s) for s in m.app.service_names)
        True
        """
        d = self._dep(service)
        if d is None:
            return self._summary_plain(service)
        spec = self.spec[service]
        tpl = d.current.template
        cur, want = tpl["env"], spec.env
        env_d = cur != want and any(want.get(k) != cur.get(k) for k in set(want) | set(cur))
        r, sr = tpl["resources"], spec.resources
        cpu_d = r.get("cpu_request_m") != sr.cpu_request_m or r.get("cpu_limit_m") != sr.cpu_limit_m
        mem_d = r.get("mem_request_mi") != sr.mem_request_mi or r.get("mem_limit_mi") != sr.mem_limit_mi
        revs = sorted(d.rss, key=lambda x: x.revision)
        meta_of = self.b.meta_of
        metas = [meta_of(rs) for rs in revs]
        n_new = sum(1 for meta in metas if float(meta.get("t", -1.0)) >= 0)
        change = change_t = None
        if len(d.rss) >= 2:   # `_last_change_rs`
            cur_rev = d.current.revision
            for i in range(len(revs) - 1, 0, -1):
                if revs[i].revision > cur_rev:
                    continue
                kind = metas[i].get("kind", "build")
                if kind == "restart" or float(metas[i].get("t", -1.0)) < 0:
                    continue
                change = (revs[i].revision, revs[i - 1].revision, kind)
                break
        if change is not None:
            for rs, meta in zip(revs, metas):
                if rs.revision == change[0]:
                    change_t = float(meta.get("t", 0.0))
        return env_d, cpu_d, mem_d, int(d.replicas), n_new, change, change_t

    def _summary_plain(self, service: str) -> tuple[bool, bool, bool, int, int, tuple[int, int, str] | None,
                                                    float | None]:
        """`summary` from the separate reads (its definition)."""
        revs = self.revisions(service)
        change = self.last_change_kind(service)
        change_t = None
        if change is not None:
            for rev, meta, _ in revs:
                if rev == change[0]:
                    change_t = float(meta.get("t", 0.0))
        return (bool(self.env_drift(service)), self.resource_drift(service, "cpu"),
                self.resource_drift(service, "memory"), self.desired_replicas(service),
                sum(1 for _, meta, _ in revs if float(meta.get("t", -1.0)) >= 0), change, change_t)

    def _artifact(self, service: str, kind: str, meta: dict, tpl: dict, prev: dict) -> str:
        if kind == "build":
            path = _first_diff_path(_render_diff(meta))
            return f"{service}:{path}" if path else f"{service}:image"
        if kind == "image":
            return f"{service}:image"
        if kind == "config":
            a, b = tpl.get("env", {}), prev.get("env", {})
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return f"{service}:{keys[0]}" if keys else f"{service}:env"
        if kind == "resources":
            a, b = tpl.get("resources", {}), prev.get("resources", {})
            if a.get("mem_limit_mi") != b.get("mem_limit_mi") or a.get("mem_request_mi") != b.get("mem_request_mi"):
                return f"{service}:limits.memory"
            return f"{service}:limits.cpu"
        return f"{service}:{kind}"

    def latest_diff(self, service: str) -> str:
        """The source-file part of the last change revision's diff ('' when it changed no source file)."""
        ch = self.last_change_kind(service)
        if ch is None or ch[2] != "build":
            return ""
        for rev, meta, _ in self.revisions(service):
            if rev == ch[0]:
                lines = _source_sections((_render_diff(meta) or "").splitlines())
                return "\n".join(lines) + "\n" if lines else ""
        return ""

    def source_changed(self, service: str) -> bool:
        """``bool(latest_diff(service))`` without rendering the diff where the twin still holds the revision's two
        trees (``diff_of``, kept until a history read renders it): the rendered diff has a source-file section with
        hunks exactly when some file's text differs between them (a missing file reads as '', and difflib writes a
        hunk whenever the two line lists differ; the files come first in the diff, so the first differing one opens
        a kept section). Elsewhere the rendered diff's sections. tests/wrappers compare it with
        ``bool(latest_diff)`` for every service at every step of whole episodes."""
        ch = self.last_change_kind(service)
        if ch is None or ch[2] != "build":
            return False
        for rev, meta, _ in self.revisions(service):
            if rev == ch[0]:
                trees = meta.get("diff_of")
                if trees is not None:
                    old, new = trees[0], trees[1]
                    return any((old.get(p) or "") != (new.get(p) or "") for p in old.keys() | new.keys())
                return bool(_source_sections((_render_diff(meta) or "").splitlines()))
        return False

    # -- nodes --------------------------------------------------------------------------------------
    def node_names(self) -> list[str]:
        return [n.name for n in self.b.cluster.nodes]

    def cordoned(self, node: str) -> bool:
        i = self.b.cluster.node_index.get(node)
        return False if i is None else bool(self.b.cluster.nodes[i].cordoned)

    def node_ready(self, node: str) -> bool:
        i = self.b.cluster.node_index.get(node)
        return False if i is None else bool(self.b.cluster.nodes[i].ready)

    def services_on_nodes(self, nodes: list[str]) -> list[str]:
        """Services with a live pod on any of ``nodes`` (app order)."""
        idx = {self.b.cluster.node_index[n] for n in nodes if n in self.b.cluster.node_index}
        out = []
        for s in self.app.service_names:
            d = self._dep(s)
            if d is not None and any(p.node in idx for p in d.live_pods()):
                out.append(s)
        return out

    def services_by_node(self) -> dict[str, list[str]]:
        """node name -> `services_on_nodes` of that node alone, in app order (one pass over the pods;
        nodes without a live pod are absent)."""
        name_of = {i: n for n, i in self.b.cluster.node_index.items()}
        out: dict[str, list[str]] = {}
        for s in self.app.service_names:
            d = self._dep(s)
            if d is None:
                continue
            for i in {p.node for p in d.live_pods()}:
                n = name_of.get(i)
                if n is not None:
                    out.setdefault(n, []).append(s)
        return out

    def nodes_of(self, services: list[str]) -> set[str]:
        """Names of the nodes where any of ``services`` has a live pod: the nodes whose `services_by_node`
        entry names one of them (one pass over those services' pods)."""
        c = self.b.cluster
        deps = c.deployments
        idx = {p.node for d in map(deps.get, services) if d is not None for p in d.live_pods()}
        return {n for n, i in c.node_index.items() if i in idx}

    def zone_nodes(self, zone: str) -> list[str]:
        return [n.name for n in self.b.cluster.nodes if n.zone == zone]

    # -- flags --------------------------------------------------------------------------------------
    def flag_drift(self, flag: str) -> bool:
        for f in self.app.flags:
            if f.name == flag:
                v = self.b.flag_variant(flag)
                return v is not None and v != f.default_variant
        return False


def _render_diff(meta: dict) -> str:
    """The revision's unified diff; the twin renders it lazily on first read."""
    from sremarathon_env.backends.sim.backend import _diff

    return _diff(meta)


def _first_diff_path(diff: str) -> str | None:
    for line in diff.splitlines():
        if line.startswith("+++ "):
            p = line[4:].strip().split("\t")[0]
            if p.startswith("b/"):
                p = p[2:]
            if p and p != "/dev/null":
                return p
    for line in diff.splitlines():
        if line.startswith("--- "):
            p = line[4:].strip().split("\t")[0]
            return p[2:] if p.startswith("a/") else p
    return None


def _source_sections(lines: list[str]) -> list[str]:
    """Keep only the file sections that carry hunks (drops descriptive pseudo-sections such as the
    twin's ``deployment.yaml (image)`` note, which are not patches of the source tree)."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        if lines[k].startswith("--- ") and k + 1 < len(lines) and lines[k + 1].startswith("+++ "):
            j = k + 2
            while j < len(lines) and not (lines[j].startswith("--- ") and j + 1 < len(lines)
                                          and lines[j + 1].startswith("+++ ")):
                j += 1
            if k + 2 < j and lines[k + 2].startswith("@@"):
                out.extend(lines[k:j])
            k = j
        else:
            k += 1
    return out


def reverse_diff(diff: str) -> str:
    """The unified diff that undoes ``diff`` (old and new swapped, hunk ranges swapped); sections
    without hunks are dropped.

    >>> d = "--- a/x.py\\n+++ b/x.py\\n@@ -1,2 +1,2 @@\\n a\\n-b\\n+c\\n"
    >>> print(reverse_diff(d), end="")
    --- a/x.py
    +++ b/x.py
    @@ -1,2 +1,2 @@
     a
    -c
    +b
    """
    import re

    out = []
    lines = _source_sections(diff.splitlines())
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = line[4:], lines[i + 1][4:]
            new_old = new[2:] if new.startswith("b/") else new
            old_new = old[2:] if old.startswith("a/") else old
            out.append("--- " + ("a/" + new_old if new_old != "/dev/null" else new_old))
            out.append("+++ " + ("b/" + old_new if old_new != "/dev/null" else old_new))
            i += 2
            continue
        m = re.match(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$", line)
        if m:
            out.append(f"@@ -{m.group(2)} +{m.group(1)} @@{m.group(3)}")
            # within a hunk, removed lines must precede added ones: swap the blocks of each change
            i += 1
            minus: list[str] = []
            plus: list[str] = []
            while i < len(lines) and not lines[i].startswith("@@") and not (
                    lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
                ln = lines[i]
                if ln.startswith("-"):
                    plus.append("+" + ln[1:])
                elif ln.startswith("+"):
                    minus.append("-" + ln[1:])
                else:
                    out.extend(minus + plus)
                    minus, plus = [], []
                    out.append(ln)
                i += 1
            out.extend(minus + plus)
            continue
        out.append(line)
        i += 1
    return "\n".join(out) + ("\n" if diff.endswith("\n") else "")
