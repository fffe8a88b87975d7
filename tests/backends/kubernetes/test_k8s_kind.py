"""The kind provider: generated configuration and command lines (no Docker on the build machines)."""

from __future__ import annotations

import json
import subprocess

import yaml

from sremarathon_env.backends.kubernetes.kind import KindPlan, prometheus_manifests


def _nodes_json():
    def node(name, zone, ip, cidr):
        labels = {"kubernetes.io/hostname": name}
        if zone:
            labels["topology.kubernetes.io/zone"] = zone
        return {"metadata": {"name": name, "labels": labels}, "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
                "status": {"addresses": [{"type": "InternalIP", "address": ip}]}}
    return {"items": [node("sre-control-plane", None, "172.18.0.2", "10.244.0.0/24"),
                      node("sre-worker", "zone-a", "172.18.0.3", "10.244.1.0/24"),
                      node("sre-worker2", "zone-a", "172.18.0.4", "10.244.2.0/24"),
                      node("sre-worker3", "zone-b", "172.18.0.5", "10.244.3.0/24")]}


def test_config_five_workers_two_zones(tmp_path):
    plan = KindPlan(workdir=str(tmp_path))
    plan.write_files()
    cfg = yaml.safe_load(plan.config_path.read_text())
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
    assert len(workers) == 5 and [n["role"] for n in cfg["nodes"]].count("control-plane") == 1
    zones = [n["labels"]["topology.kubernetes.io/zone"] for n in workers]
    assert zones.count("zone-a") == 3 and zones.count("zone-b") == 2
    assert [n["labels"]["sremarathon.io/node"] for n in workers] == [n.name for n in plan.app.topology.nodes]
    docs = list(yaml.safe_load_all(plan.manifest_path.read_text()))
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "online-boutique"}}
    assert sum(d["kind"] == "Deployment" for d in docs) == 11


def test_netem_delays_only_cross_zone_traffic(tmp_path):
    plan = KindPlan(workdir=str(tmp_path))
    cmds = plan.netem_commands(_nodes_json())
    by_node = {}
    for c in cmds:
        assert c[:3] == ["docker", "exec", c[2]] and c[3] == "tc"
        by_node.setdefault(c[2], []).append(c[4:])
    assert "sre-control-plane" not in by_node          # no zone label: left alone
    netem = [c for c in by_node["sre-worker"] if "netem" in c]
    assert netem == [["qdisc", "replace", "dev", "eth0", "parent", "1:3", "handle", "30:", "netem", "delay", "12.5ms"]]
    dsts = lambda n: sorted(c[c.index("dst") + 1] for c in by_node[n] if "dst" in c)  # noqa: E731
    assert dsts("sre-worker") == ["10.244.3.0/24", "172.18.0.5/32"]
    assert dsts("sre-worker3") == ["10.244.1.0/24", "10.244.2.0/24", "172.18.0.3/32", "172.18.0.4/32"]
    prio = by_node["sre-worker"][0]
    assert prio[:9] == ["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "prio", "bands"]
    assert prio[prio.index("priomap") + 1:] == ["0"] * 16   # default traffic never lands in the delayed band


def test_up_runs_the_plan_in_order(tmp_path):
    plan = KindPlan(workdir=str(tmp_path), kind_bin="/opt/kind")
    ran = []

    def fake_run(cmd, check=False, capture_output=False, text=False):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(_nodes_json()) if "nodes" in cmd else "")

    done = plan.up(run=fake_run)
    assert done == ran
    assert ran[0] == ["/opt/kind", "create", "cluster", "--name", "sre", "--config", str(plan.config_path),
                      "--kubeconfig", str(plan.kubeconfig_path), "--wait", "180s"]
    assert ran[1][-4:] == ["get", "nodes", "-o", "json"]
    applies = [c for c in ran if "apply" in c]
    assert [c[-1] for c in applies] == [str(plan.manifest_path), str(plan.prometheus_path)]
    assert ran.index(applies[0]) > max(i for i, c in enumerate(ran) if c[0] == "docker")
    assert plan.down(run=fake_run) == [["/opt/kind", "delete", "cluster", "--name", "sre", "--kubeconfig",
                                        str(plan.kubeconfig_path)]]


def test_prometheus_scrapes_the_app_namespace():
    docs = prometheus_manifests("online-boutique")
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    conf = yaml.safe_load(cm["data"]["prometheus.yml"])
    job = conf["scrape_configs"][0]
    assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == ["online-boutique"]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "prometheus"


def test_cli_dry_run_prints_commands(tmp_path, capsys):
    from sremarathon_env.cli import main
    assert main(["cluster", "up", "--provider", "kind", "--dry-run", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kind create cluster --name sre" in out and (tmp_path / "kind-config.yaml").exists()
