"""Every baseline on a short marathon (10 min injection + 4 min observation)."""

import pytest

from baselines import make_policy
from baselines.runner import run_marathon
from sremarathon_env.bundle import read_bundle

SHORT = {"injection_s": 600, "observation_s": 240}


def test_noop_scores_zero_and_writes_a_bundle(tmp_path):
    rep, path = run_marathon("online-boutique", 0, "noop", out_dir=tmp_path, **SHORT)
    assert rep.marathon_score == 0.0 and rep.n_faults > 0 and rep.n_actions == 0
    b = read_bundle(path)
    assert b.complete and b.meta["policy"] == "noop" and path == tmp_path / "noop" / "online-boutique" / "seed-0"
    with pytest.raises(FileExistsError):
        run_marathon("online-boutique", 0, "noop", out_dir=tmp_path, **SHORT)


def test_oracle_credits_every_fault_on_a_short_marathon():
    # 10 faults: one repair the cadence or an overlapping fault's symptom keeps from its 2-minute hold before the
    # scheduled end costs 3.3 points here (seed 0 loses two: a silent fault first alerting 207 s after onset, a
    # CPU-limit fault whose service stays hot under a concurrent load surge), so the >= 95 claim itself is checked
    # on full marathons (test_oracle_full.py); every fault is still correlated and localised exactly
    rep, _ = run_marathon("online-boutique", 0, "oracle", **SHORT)
    assert rep.marathon_score >= 90.0 and rep.stage_shares.repaired >= 0.8
    assert rep.stage_shares.correlated == 1.0 and rep.stage_shares.localised == 1.0
    assert rep.intervention_risk == 0.0 and rep.n_forbidden == 0


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
@pytest.mark.parametrize("seed", [1, 4])
def test_oracle_localises_every_fault_of_every_app(app, seed):
    # ~10 faults: one lost to the invocation cadence costs 3.3 points here, so the >= 95 claim itself is
    # checked on full marathons (test_oracle_full.py); every fault is still reported exactly, and every fault
    # whose repair fits before the marathon's end (onset, detection, the repair's pod boots and the hold:
    # `repairable_min_s`) is repaired but at most one. On a 14-minute marathon a fault injected late cannot be:
    # Train Ticket seed 1 has four injected after 430 s whose repairs boot JVM services for ~4 minutes.
    from apps import load_app
    from faults.catalogue import fault_by_id
    from faults.orchestrator import repairable_min_s

    rep, _ = run_marathon(app, seed, "oracle", **SHORT)
    assert rep.stage_shares.correlated == 1.0 and rep.stage_shares.localised == 1.0
    spec, end = load_app(app), SHORT["injection_s"] + SHORT["observation_s"]
    fits = [f for f in rep.faults if f.start_s + repairable_min_s(fault_by_id(f.fault_id), spec) <= end]
    assert fits and sum(f.outcome == "handled" for f in fits) >= len(fits) - 1, [(f.instance_id, f.outcome) for f in fits]
    assert rep.marathon_score >= 80.0
    assert rep.intervention_risk == 0.0 and rep.n_forbidden == 0


@pytest.mark.parametrize("policy", ["runbook", "keep", "random"])
def test_scripted_baselines_act_and_score_between(policy):
    rep, _ = run_marathon("online-boutique", 1, policy, **SHORT)
    assert rep.n_actions > 0
    assert 0.0 < rep.marathon_score < 95.0
    assert rep.n_forbidden == 0


def test_runs_are_deterministic(tmp_path):
    a, _ = run_marathon("online-boutique", 2, "keep", **SHORT)
    b, _ = run_marathon("online-boutique", 2, "keep", **SHORT)
    assert a.digest == b.digest and a.marathon_score == b.marathon_score
    r1, _ = run_marathon("online-boutique", 2, "random", **SHORT)
    r2, _ = run_marathon("online-boutique", 2, "random", **SHORT)
    assert r1.digest == r2.digest


def test_random_differs_by_seed_offset():
    a, _ = run_marathon("online-boutique", 3, make_policy("random", seed_offset=0), **SHORT)
    b, _ = run_marathon("online-boutique", 3, make_policy("random", seed_offset=1), **SHORT)
    assert a.digest != b.digest


def test_keep_groups_each_alert_into_at_most_one_incident(tmp_path):
    _, path = run_marathon("online-boutique", 0, "keep", out_dir=tmp_path, **SHORT)
    owner = {}
    latest = {}
    for r in read_bundle(path).records:
        if r.kind == "incident":
            latest[r.data["incident_id"]] = r.data
    for iid, d in latest.items():
        for fp in d["alerts"]:
            assert owner.setdefault(fp, iid) == iid, f"{fp} in {owner[fp]} and {iid}"
    assert latest


def test_policy_exception_loses_only_its_invocation():
    from baselines.base import Policy

    class Boom(Policy):
        name = "boom"

        def act(self, session):
            session.call("get_topology", {})
            raise RuntimeError("kaput")

    rep, _ = run_marathon("online-boutique", 0, Boom(), **SHORT)
    assert rep.complete and rep.n_invocations == 7


def test_make_policy_errors():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope")
    with pytest.raises(ValueError, match="ppo needs a checkpoint"):
        make_policy("ppo")


def test_keep_names_a_slow_datastore_from_the_packs_latency_rules():
    """A datastore with latency alerts and no error alerts is diagnosed slow-io (the rule names come from the pack)."""
    from apps import load_app
    from baselines.keep import KeepPolicy
    from sremarathon_env.alerts import load_rule_pack

    pack = {r.name for r in load_rule_pack().rules}
    pol = KeepPolicy()
    pol.reset(load_app("online-boutique"), 0)

    def diag(*names):
        assert set(names) <= pack
        return pol._diagnose(None, "redis-cart", [{"alertname": n} for n in names], 600.0)[0]

    assert diag("ServiceLatencyP99High") == "redis-cart:slow-io"
    assert diag("ServiceCallLatencyHigh", "ServiceLatencyP50High") == "redis-cart:slow-io"
    assert diag("ServiceLatencyP99High", "ServiceErrorRateHigh") == "redis-cart:auth-revoked"
    assert diag("ServiceCallFailuresHigh") == "redis-cart:auth-revoked"
    assert diag("KubePodCrashLooping") == "redis-cart:down"
