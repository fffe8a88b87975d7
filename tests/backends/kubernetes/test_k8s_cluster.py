"""The local cluster supervisor without the control-plane binaries: nodes, command lines, process control."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sremarathon_env.backends.kubernetes.cluster import COMPONENTS, LocalCluster, Ports, node_objects


def test_nodes_follow_the_app_topology_on_loopback():
    nodes = node_objects("online-boutique")
    assert [n["metadata"]["name"] for n in nodes] == ["node-a1", "node-a2", "node-a3", "node-b1", "node-b2"]
    for n in nodes:
        assert n["status"]["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.1"}
        assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert n["metadata"]["labels"]["sremarathon.io/node"] == n["metadata"]["name"]
        assert n["status"]["allocatable"] == {"cpu": "4000m", "memory": "16384Mi", "pods": "110"}


def test_command_lines_bind_loopback_and_use_the_ports(tmp_path):
    c = LocalCluster(name="x", workdir=str(tmp_path), ports=Ports(apiserver=1111, etcd=2222, kwok=3333))
    cmds = c.commands(Path("/b"), tmp_path / "pki")
    assert list(cmds) == list(COMPONENTS)
    api = cmds["kube-apiserver"]
    assert "--etcd-servers=http://127.0.0.1:2222" in api and "--secure-port=1111" in api
    assert "--bind-address=127.0.0.1" in api and "--endpoint-reconciler-type=none" in api
    assert f"--config={tmp_path / 'kwok.yaml'}" in cmds["kwok"] and "--node-ip=127.0.0.1" in cmds["kwok"]
    assert "--server-address=127.0.0.1:3333" in cmds["kwok"]
    for comp, argv in cmds.items():
        assert argv[0] == f"/b/{comp}"
        assert not any("0.0.0.0" in a for a in argv), comp


def test_down_stops_only_recorded_processes(tmp_path):
    sleep = shutil.which("sleep")
    c = LocalCluster(name="x", workdir=str(tmp_path))
    (tmp_path / "logs").mkdir()
    st = {"procs": {}}
    c._start("etcd", [sleep, "300"], st)
    c._start("kwok", [sleep, "301"], st)
    pids = c.running()
    assert sorted(pids) == ["etcd", "kwok"]
    # a recorded pid that now runs another program is not ours: never signalled
    st["procs"]["kube-scheduler"] = {"pid": os.getpid(), "exe": "/not/the/scheduler"}
    c._save(st)
    assert "kube-scheduler" not in c.running()
    assert sorted(c.down()) == ["etcd", "kwok"]
    assert c.running() == {}
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def test_up_without_binaries_is_a_clear_error(tmp_path, monkeypatch):
    from sremarathon_env.backends.kubernetes import cluster as mod
    monkeypatch.setattr(mod, "find_bin_dir", lambda: None)
    with pytest.raises(mod.ClusterError, match="build_control_plane"):
        LocalCluster(name="x", workdir=str(tmp_path)).up()
