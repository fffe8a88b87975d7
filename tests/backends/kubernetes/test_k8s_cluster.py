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


def test_free_ports_are_distinct_and_bindable():
    from sremarathon_env.backends.kubernetes.cluster import busy_ports
    p = Ports.free()
    assert len(set(p.__dict__.values())) == 6 and busy_ports(p) == []


def test_up_refuses_a_taken_port_and_names_its_holder(tmp_path):
    """The flake: a leftover kube-apiserver held the port, the new one failed to bind (and etcd's health check
    answered from the old cluster's etcd). Now `up` refuses before starting anything, naming the holder."""
    import socket
    ports = Ports.free()
    holder = socket.socket()
    holder.bind(("127.0.0.1", ports.apiserver))
    holder.listen()
    try:
        c = LocalCluster(name="x", workdir=str(tmp_path), bin_dir=str(tmp_path / "bin"), ports=ports)
        with pytest.raises(Exception, match=rf"apiserver 127.0.0.1:{ports.apiserver} is in use \(pid {os.getpid()}:"):
            c.up()
        assert c.running() == {} and not (tmp_path / "logs").exists()
    finally:
        holder.close()


_PARENT = """
import sys, shutil
from sremarathon_env.backends.kubernetes.cluster import LocalCluster
c = LocalCluster(name="x", workdir=sys.argv[1], die_with_parent=sys.argv[2] == "1")
(c.root / "logs").mkdir(parents=True, exist_ok=True)
c._start("etcd", [shutil.which("sleep"), "300"], {"procs": {}})
print(c.running()["etcd"], flush=True)
"""


@pytest.mark.parametrize("tied", [True, False])
def test_components_die_with_a_killed_parent_only_when_tied(tmp_path, tied):
    """A test run killed mid-way must not leave orphans holding the ports; the CLI's cluster must outlive it."""
    import subprocess
    import sys
    import time
    out = subprocess.run([sys.executable, "-c", _PARENT, str(tmp_path), "1" if tied else "0"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    pid = int(out.split()[-1])
    c = LocalCluster(name="x", workdir=str(tmp_path))
    try:
        end = time.monotonic() + (5 if tied else 0.5)   # tied: gone within ms; untied: still there after 0.5 s
        while c.running() and time.monotonic() < end:
            time.sleep(0.05)
        assert (c.running() == {}) is tied, (pid, c.running())
    finally:
        c.down()
    assert c.running() == {}


def test_down_waits_until_the_ports_are_free(tmp_path):
    """Stopping returns only once a new cluster could bind the same ports (no 'address already in use')."""
    import sys
    import time
    from sremarathon_env.backends.kubernetes.cluster import _bindable
    ports = Ports.free()
    c = LocalCluster(name="x", workdir=str(tmp_path), ports=ports)
    (tmp_path / "logs").mkdir()
    st = {"procs": {}, "ports": ports.__dict__}
    # (SO_REUSEADDR as the components' Go listeners set: a free port may still have a connection in TIME_WAIT,
    # which a plain bind refuses - the child then exited with 'Address already in use' and the wait below timed out)
    prog = ("import signal, socket, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1), sys.exit(0)));"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
            f"s.bind(('127.0.0.1', {ports.etcd})); s.listen(); time.sleep(300)")
    c._start("etcd", [sys.executable, "-c", prog], st)
    end = time.monotonic() + 10
    while _bindable(ports.etcd) and time.monotonic() < end:
        time.sleep(0.02)
    assert not _bindable(ports.etcd)
    assert c.down() == ["etcd"]
    assert _bindable(ports.etcd)


def test_a_component_is_running_right_after_start(tmp_path):
    """Popen returns while /proc/<pid>/cmdline is still empty; that must not read as 'exited' (a spurious
    'etcd exited while waiting for etcd health')."""
    sleep = shutil.which("sleep")
    c = LocalCluster(name="x", workdir=str(tmp_path))
    (tmp_path / "logs").mkdir()
    for _ in range(10):
        c._start("etcd", [sleep, "300"], {"procs": {}})
        seen = c.running()
        c.down()
        assert list(seen) == ["etcd"]
