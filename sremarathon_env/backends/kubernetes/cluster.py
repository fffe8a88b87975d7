"""A local Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (simulated kubelets), supervised as plain processes. No containers.

The binaries come from ``live/build_control_plane.sh`` (built from Go modules, cached by version
under ``~/.cache/sremarathon/k8s/<versions>/bin``; ``SREMARATHON_K8S_BIN`` overrides). `LocalCluster`
writes a throw-away PKI (openssl), starts every component in its own session with pid files, waits
until the API serves, creates one kwok Node per node of the app's topology (two zones, labelled
``topology.kubernetes.io/zone``, InternalIP 127.0.0.1 so nothing leaves loopback) and writes a
kubeconfig. `LocalCluster.down` stops every process it started (by recorded pid and session, never
by name), waits until its ports are free again and removes the etcd data.

Ports: `up` refuses to start when one of its ports is already taken (naming the port and the
process holding it) instead of letting a component fail to bind, or, worse, talk to another
cluster's etcd. `Ports.free()` picks unused loopback ports, and ``die_with_parent=True`` makes every
component die with the process that started it, so a killed test run leaves no orphan behind.

>>> c = LocalCluster(name="doc", workdir="/tmp/sre-doc-cluster")
>>> c.kubeconfig_path.endswith("/tmp/sre-doc-cluster/kubeconfig.yaml")
True
>>> [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in node_objects()][:4]
['zone-a', 'zone-a', 'zone-a', 'zone-b']
>>> p = Ports.free(); len(set(p.__dict__.values())) == 6 and busy_ports(p) == []
True
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sremarathon_env.backends.kubernetes.stages import NODE_FAULT_LABEL

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
DEFAULT_VERSIONS = "v1.36.3-kwok0.8.0-etcd3.6.16"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class ClusterError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("SREMARATHON_CACHE", Path.home() / ".cache" / "sremarathon"))


def find_bin_dir() -> Path | None:
    """The directory holding a complete set of control-plane binaries, or None."""
    env = os.environ.get("SREMARATHON_K8S_BIN")
    cands = [Path(env)] if env else []
    base = cache_root() / "k8s"
    cands.append(base / DEFAULT_VERSIONS / "bin")
    if base.is_dir():
        cands.extend(sorted((p / "bin" for p in base.iterdir()), reverse=True))
    for d in cands:
        if all((d / b).is_file() and os.access(d / b, os.X_OK) for b in BINARIES):
            return d
    return None


def build_script() -> Path | None:
    """``live/build_control_plane.sh`` of a source checkout, when there is one."""
    p = Path(__file__).resolve().parents[3] / "live" / "build_control_plane.sh"
    return p if p.is_file() else None


@dataclass
class Ports:
    apiserver: int = 16443
    etcd: int = 12379
    etcd_peer: int = 12380
    kwok: int = 10247
    controller_manager: int = 10257
    scheduler: int = 10259

    @classmethod
    def free(cls, host: str = "127.0.0.1") -> "Ports":
        """Six distinct ports that nothing listens on now (chosen by the kernel, so concurrent callers differ)."""
        socks = []
        try:
            for _ in cls.__dataclass_fields__:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((host, 0))
                socks.append(s)
            return cls(*(s.getsockname()[1] for s in socks))
        finally:
            for s in socks:
                s.close()


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    """True when a listener could bind host:port now (SO_REUSEADDR, as Go's listeners set, so TIME_WAIT is fine)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def port_holder(port: int) -> str | None:
    """``"pid 123: /path/prog args"`` of the process listening on TCP ``port`` (Linux /proc), or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return None
    for pid in sorted((d for d in os.listdir("/proc") if d.isdigit()), key=int):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                return f"pid {pid}: " + " ".join(a.decode(errors="replace") for a in argv[:3] if a)
        except OSError:
            continue
    return "a process this user cannot see"


def busy_ports(ports: Ports) -> list[str]:
    """One line per port of ``ports`` that is already taken on 127.0.0.1, naming its holder when known."""
    out = []
    for name, port in sorted(ports.__dict__.items()):
        if not _bindable(port):
            out.append(f"{name} 127.0.0.1:{port} is in use ({port_holder(port) or 'holder unknown'})")
    return out


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the kernel kills us when our parent exits


def node_objects(app: Any = None) -> list[dict[str, Any]]:
    """kwok Node objects for the app's topology (default: Online Boutique's five nodes in two zones)."""
    if app is None or isinstance(app, str):
        from apps import load_app
        app = load_app(app or "online-boutique")
    out = []
    for n in app.topology.nodes:
        region = "local"
        alloc = {"cpu": f"{n.cpu_m}m", "memory": f"{n.mem_mi}Mi", "pods": "110"}
        out.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n.name,
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                         "labels": {"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok", "sremarathon.io/node": n.name,
                                    "topology.kubernetes.io/zone": n.zone,
                                    "topology.kubernetes.io/region": region}},
            "spec": {},
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": n.name}]},
        })
    return out


@dataclass
class LocalCluster:
    name: str = "sre"
    workdir: str | None = None
    bin_dir: str | None = None
    ports: Ports = field(default_factory=Ports)
    # True: every component gets SIGKILL from the kernel when the process that started it exits (tests:
    # a killed pytest leaves no orphan holding the ports). False (the CLI): the cluster outlives `cluster up`.
    die_with_parent: bool = False

    def __post_init__(self) -> None:
        self.root = Path(self.workdir or cache_root() / "clusters" / self.name)
        self.kubeconfig_path = str(self.root / "kubeconfig.yaml")
        self.state_path = self.root / "state.json"

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, st: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(st, indent=2, sort_keys=True))
        tmp.replace(self.state_path)

    def running(self) -> dict[str, int]:
        """Component -> pid for every recorded process that is still alive and is ours."""
        out = {}
        for comp, rec in sorted(self.state().get("procs", {}).items()):
            if _alive(rec["pid"], rec["exe"]):
                out[comp] = rec["pid"]
        return out

    # ------------------------------------------------------------------ PKI and kubeconfig
    def _pki(self) -> Path:
        d = self.root / "pki"
        if (d / "admin.crt").exists():
            return d
        d.mkdir(parents=True, exist_ok=True)
        ext = d / "ext.cnf"
        ext.write_text("subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                       "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1\n"
                       "extendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
        run = lambda *a: subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)  # noqa: E731
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
            "-subj", "/CN=sremarathon-ca")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "admin.key", "-out", "admin.csr",
            "-subj", "/O=system:masters/CN=sremarathon-admin")
        run("x509", "-req", "-in", "admin.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "admin.crt", "-days", "3650", "-extfile", "ext.cnf")
        return d

    def _write_kubeconfig(self, pki: Path) -> None:
        import yaml
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": self.name,
               "clusters": [{"name": self.name, "cluster": {
                   "server": f"https://127.0.0.1:{self.ports.apiserver}",
                   "certificate-authority": str(pki / "ca.crt")}}],
               "users": [{"name": f"{self.name}-admin", "user": {
                   "client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")}}],
               "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": f"{self.name}-admin"}}]}
        Path(self.kubeconfig_path).write_text(yaml.safe_dump(cfg, sort_keys=False))

    # ------------------------------------------------------------------ command lines
    def commands(self, bin_dir: Path, pki: Path) -> dict[str, list[str]]:
        p, r, b = self.ports, self.root, bin_dir
        kc = self.kubeconfig_path
        crt, key, ca = str(pki / "admin.crt"), str(pki / "admin.key"), str(pki / "ca.crt")
        allow = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"
        return {
            "etcd": [str(b / "etcd"), "--name=node0", f"--data-dir={r / 'etcd'}",
                     f"--listen-client-urls=http://127.0.0.1:{p.etcd}",
                     f"--advertise-client-urls=http://127.0.0.1:{p.etcd}",
                     f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                     f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                     f"--initial-cluster=node0=http://127.0.0.1:{p.etcd_peer}",
                     "--auto-compaction-retention=1", "--quota-backend-bytes=8589934592", "--unsafe-no-fsync",
                     "--listen-metrics-urls=http://127.0.0.1:0"],
            "kube-apiserver": [str(b / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{p.etcd}",
                               "--etcd-prefix=/registry", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                               f"--secure-port={p.apiserver}", f"--tls-cert-file={crt}",
                               f"--tls-private-key-file={key}", f"--client-ca-file={ca}",
                               "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                               f"--service-account-key-file={key}", f"--service-account-signing-key-file={key}",
                               f"--proxy-client-cert-file={crt}", f"--proxy-client-key-file={key}",
                               "--authorization-mode=Node,RBAC", "--allow-privileged=true",
                               "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
                               f"--cert-dir={r / 'pki' / 'apiserver'}"],
            "kube-controller-manager": [str(b / "kube-controller-manager"), f"--kubeconfig={kc}",
                                        f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                                        "--bind-address=127.0.0.1", f"--secure-port={p.controller_manager}",
                                        "--leader-elect=false", allow, f"--root-ca-file={ca}",
                                        f"--service-account-private-key-file={key}",
                                        "--use-service-account-credentials=false", "--node-monitor-period=2s",
                                        "--node-monitor-grace-period=20s",
                                        f"--cert-dir={r / 'pki' / 'kcm'}"],
            "kube-scheduler": [str(b / "kube-scheduler"), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
                               f"--authorization-kubeconfig={kc}", "--bind-address=127.0.0.1",
                               f"--secure-port={p.scheduler}", "--leader-elect=false", allow,
                               f"--cert-dir={r / 'pki' / 'scheduler'}"],
            # a Node labelled sremarathon.io/node-fault leaves kwok's selection: its "kubelet" goes silent
            # (no lease, no status), so the node-lifecycle controller marks it Unknown and its pods not Ready
            "kwok": [str(b / "kwok"), f"--kubeconfig={kc}", f"--config={r / 'kwok.yaml'}",
                     f"--manage-nodes-with-label-selector=!{NODE_FAULT_LABEL}",
                     f"--server-address=127.0.0.1:{p.kwok}", "--node-ip=127.0.0.1", f"--node-port={p.kwok}",
                     f"--tls-cert-file={crt}", f"--tls-private-key-file={key}", "--node-lease-duration-seconds=20"],
        }

    # ------------------------------------------------------------------ lifecycle
    def up(self, app: Any = None, timeout_s: float = 240.0) -> dict[str, Any]:
        """Start the cluster (idempotent when it already runs); returns timings in seconds."""
        from sremarathon_env.backends.kubernetes.stages import kwok_config_yaml

        if self.running():
            if len(self.running()) == len(COMPONENTS):
                return {"already_running": True, **self.state().get("timings", {})}
            self.down()
        bin_dir = Path(self.bin_dir) if self.bin_dir else find_bin_dir()
        if bin_dir is None:
            raise ClusterError("no control-plane binaries: run live/build_control_plane.sh (or `sremarathon cluster "
                               "build`), or set SREMARATHON_K8S_BIN")
        busy = busy_ports(self.ports)
        if busy:
            raise ClusterError("cannot start: " + "; ".join(busy) + " (another cluster or a leftover process; "
                               "stop it or choose other ports, e.g. Ports.free())")
        t0 = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.root / "etcd", ignore_errors=True)
        (self.root / "logs").mkdir(exist_ok=True)
        pki = self._pki()
        self._write_kubeconfig(pki)
        (self.root / "kwok.yaml").write_text(kwok_config_yaml())
        cmds = self.commands(bin_dir, pki)
        st: dict[str, Any] = {"name": self.name, "bin_dir": str(bin_dir), "procs": {},
                              "ports": self.ports.__dict__, "kubeconfig": self.kubeconfig_path}
        timings: dict[str, float] = {}
        try:
            for comp in COMPONENTS:
                self._start(comp, cmds[comp], st)
                if comp == "etcd":
                    self._wait(lambda: _http_ok(f"http://127.0.0.1:{self.ports.etcd}/health"), 60, "etcd health", comp)
                elif comp == "kube-apiserver":
                    self._wait(lambda: self._api_ok("/readyz"), timeout_s, "apiserver /readyz", comp)
                    timings["apiserver_ready_s"] = round(time.monotonic() - t0, 2)
            api = self.api()
            for node in node_objects(app):
                r = api.post("/api/v1/nodes", json=node)
                if r.status_code not in (201, 409):
                    raise ClusterError(f"creating node {node['metadata']['name']}: {r.status_code} {r.text[:300]}")
            want = len(node_objects(app))
            self._wait(lambda: self._ready_nodes() >= want, timeout_s, f"{want} Ready nodes", "kwok")
            self._wait(lambda: self._api_ok("/api/v1/namespaces/default/serviceaccounts/default"), timeout_s,
                       "the default ServiceAccount", "kube-controller-manager")
        except BaseException:
            self.down()
            raise
        timings["ready_s"] = round(time.monotonic() - t0, 2)
        st["timings"] = timings
        self._save(st)
        return timings

    def _start(self, comp: str, cmd: list[str], st: dict[str, Any]) -> None:
        log = open(self.root / "logs" / f"{comp}.log", "ab")
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.root, start_new_session=True,
                                    preexec_fn=_die_with_parent if self.die_with_parent else None)
        finally:
            log.close()
        st["procs"][comp] = {"pid": proc.pid, "exe": cmd[0]}
        self._save(st)

    def _wait(self, cond, timeout_s: float, what: str, comp: str) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                if cond():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            for c, rec in self.state().get("procs", {}).items():
                if not _alive(rec["pid"], rec["exe"]):
                    raise ClusterError(f"{c} exited while waiting for {what}:\n{self.log_tail(c)}")
            time.sleep(0.5)
        raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}:\n{self.log_tail(comp)}")

    def log_tail(self, comp: str, n: int = 15) -> str:
        try:
            return "\n".join((self.root / "logs" / f"{comp}.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def api(self):
        """An httpx client authenticated as the cluster admin."""
        import httpx
        pki = self.root / "pki"
        from sremarathon_env.backends.kubernetes.rest import tls_context
        return httpx.Client(base_url=f"https://127.0.0.1:{self.ports.apiserver}",
                            verify=tls_context(str(pki / "ca.crt"), str(pki / "admin.crt"), str(pki / "admin.key")),
                            timeout=10.0)

    def _api_ok(self, path: str) -> bool:
        with self.api() as c:
            return c.get(path).status_code == 200

    def _ready_nodes(self) -> int:
        with self.api() as c:
            items = c.get("/api/v1/nodes").json().get("items", [])
        return sum(1 for n in items for cond in n.get("status", {}).get("conditions", [])
                   if cond.get("type") == "Ready" and cond.get("status") == "True")

    def down(self, keep_data: bool = False, port_wait_s: float = 10.0) -> list[str]:
        """Stop every recorded process (SIGTERM to its session, SIGKILL after 10 s) and wait until the ports it
        used can be bound again; returns the names of the stopped components."""
        st = self.state()
        stopped = []
        for comp in reversed(COMPONENTS):
            rec = st.get("procs", {}).get(comp)
            if rec and _alive(rec["pid"], rec["exe"]):
                _stop(rec["pid"], rec["exe"])
                stopped.append(comp)
        if st:
            st["procs"] = {}
            self._save(st)
        if stopped:
            ports = [int(p) for p in st.get("ports", {}).values()]
            end = time.monotonic() + port_wait_s
            while any(not _bindable(p) for p in ports) and time.monotonic() < end:
                time.sleep(0.1)
        if not keep_data:
            shutil.rmtree(self.root / "etcd", ignore_errors=True)
        return stopped


def _alive(pid: int, exe: str) -> bool:
    """True when ``pid`` runs ``exe`` (a recycled pid running something else is not ours).

    Popen returns once exec has begun, a moment before the kernel fills in the new argv, when
    /proc/<pid>/cmdline still reads empty: that is read again rather than taken for an exit."""
    for attempt in range(50):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if argv0 or state == "Z":
            break
        time.sleep(0.002)
    return argv0 == exe and state != "Z"


def _stop(pid: int, exe: str) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)  # each component leads its own session, so pgid == pid
        except ProcessLookupError:
            return
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not _alive(pid, exe):
                return
            time.sleep(0.1)


def _http_ok(url: str) -> bool:
    import httpx
    return httpx.get(url, timeout=2.0).status_code == 200
