"""A numba that imports but cannot compile the kernels here leaves the numpy kernels running, with one warning:
the alert engine never fails because of the optional accelerator (runs without numba installed too)."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import compiled
from sremarathon_env.alerts.tape import CODES, KernelSpec, Tape, window_kernel
from sremarathon_env.telemetry.store import MetricStore


class _Broken:
    version = "0.0"

    @staticmethod
    def warm_up():
        raise RuntimeError("no LLVM target here")


def test_a_failing_compile_falls_back_to_numpy_with_a_warning(monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    monkeypatch.setattr(compiled, "_LOADED", [])
    monkeypatch.setattr(compiled, "_OFF", ["numba not installed"])
    monkeypatch.setattr(compiled, "_load", lambda: _Broken())
    with pytest.warns(RuntimeWarning, match="compiled alert kernels unavailable .*RuntimeError"):
        assert compiled.kernels() is None
    assert compiled.kernels() is None   # decided once per process: no second warning, no second try
    assert compiled.status() == "compiled kernels: off (numba failed: RuntimeError)"
    # and the tape's kernel answers (on numpy)
    store = MetricStore(step_s=15.0)
    fam = store.family("c_total", ("i",))
    rows = fam.rows([("a",)])
    for k in range(41):
        store.write(fam, rows, k, np.array([2.0 * k * 15]))
    tape = Tape(store)
    slots = tape.slots([(fam, 0)])
    tape.sync()
    spec = KernelSpec(slots, np.array([300_000]), np.array([0]), np.array([CODES["rate"]]))
    v, p = window_kernel(tape, spec, np.array([600_000]))
    assert float(v[0, 0]) == 2.0 and bool(p[0, 0])
