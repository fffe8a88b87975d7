"""The live backend: the `Backend` protocol against a real Kubernetes API (kwok locally, kind with Docker).

- `cluster.LocalCluster`: etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on
  loopback (``sremarathon cluster up --provider kwok``);
- `stages`: the kwok Stage objects (pod lifecycle and faults);
- `kind`: the kind configuration and command plan for users with Docker;
- `backend.KubernetesBackend`: the backend itself (needs the ``live`` extra: ``kubernetes``).

Nothing here imports the ``kubernetes`` client at import time.

>>> from sremarathon_env.backends.kubernetes import stages
>>> stages.FAULT_ANNOTATION
'sremarathon.io/fault'
"""


def __getattr__(name: str):
    if name == "KubernetesBackend":
        from sremarathon_env.backends.kubernetes.backend import KubernetesBackend
        return KubernetesBackend
    if name == "LocalCluster":
        from sremarathon_env.backends.kubernetes.cluster import LocalCluster
        return LocalCluster
    raise AttributeError(name)
