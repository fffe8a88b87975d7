"""`sremarathon bench` section env: one short marathon per app gives consistent wall and CPU figures."""

from __future__ import annotations

from sremarathon_env.env_bench import PARTS, env_section, print_env


def test_env_section_rows_and_print(capsys):
    rows = env_section(["online-boutique"], repeat=1, injection_s=600, observation_s=240)
    (r,) = rows
    assert r["steps"] == 7 and r["step_ms"] > 0 and r["marathon_s"] >= r["reset_s"] > 0
    assert set(r["share"]) == set(PARTS) and abs(sum(r["share"].values()) - 1.0) < 0.05
    c = r["cpu"]
    assert c["step_ms"] > 0 and c["marathon_s"] >= c["reset_s"] > 0
    print_env(rows)
    out = capsys.readouterr().out
    assert "online-boutique" in out and "CPU time: reset" in out and "reward replay share" in out


def test_a_deferred_spans_traffic_counts_as_the_twins():
    """The scored run advances its twin in deferred spans whose traffic is computed when the driver ends the span
    (`SimBackend.end_deferred`, inside the driver's tick): that is the twin's time, not the faults'. A fake clock
    that moves only while the twin settles a span's traffic puts all of it in the twin's share."""
    from sremarathon_env.env_bench import Timers, instrument_marathon
    from sremarathon_env.marathon import Marathon

    now = [0.0]
    m = Marathon(app="online-boutique", seed=1, injection_s=600, observation_s=240)
    m.start(observe=False)
    real = m.backend._settle

    def settle(runs):
        now[0] += 1000.0
        return real(runs)
    m.backend._settle = settle
    timers = Timers(clock=lambda: now[0])
    instrument_marathon(m, timers)
    m.advance_to_next_invocation()
    assert now[0] >= 1000.0   # (the interval ran in spans)
    assert timers.t["twin"] == now[0] and timers.t["tick"] == 0.0
