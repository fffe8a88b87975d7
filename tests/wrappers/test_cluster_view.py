"""ClusterView's change reads: the artifact-free `last_change_kind` agrees with `last_change`, and
`latest_diff` renders the revision's diff itself (it no longer relies on `last_change` having rendered it)."""

from __future__ import annotations

from sremarathon_env.backends.sim import SimBackend
from wrappers.cluster_view import ClusterView


def _twin_with_changes() -> tuple[SimBackend, str]:
    sim = SimBackend("online-boutique", seed=1)
    sim.advance_to(60.0)
    s = "cartservice"
    cur = sim._dep(s).current
    files = sim.files_of(cur)
    path = sorted(files)[0]
    assert sim.deploy(s, message="tweak", author="dev", files={path: files[path] + "// tweak\n"}).ok
    sim.advance_to(120.0)
    assert sim.deploy(s, message="env", author="dev", env={"EXTRA_FLAG": "1"}).ok
    return sim, s


def test_last_change_kind_matches_last_change_and_diff_is_rendered_on_demand():
    sim, s = _twin_with_changes()
    cv = ClusterView(sim, sim.app)
    full = cv.last_change(s)
    assert full is not None and full[2] == "config" and cv.last_change_kind(s) == full[:3]
    assert cv.latest_diff(s) == ""            # the last change is an env change: no source section
    assert sim.rollback(s, full[1]).ok        # back to the build revision
    kind = cv.last_change_kind(s)
    assert kind is not None and kind[2] == "build"
    diff = cv.latest_diff(s)                  # rendered here: nothing read the revision's diff before
    assert diff.startswith("--- a/") and "+// tweak" in diff
    assert cv.last_change(s)[:3] == kind and cv.last_change(s)[3].startswith(f"{s}:")
    assert cv.latest_diff(s) == diff
    for other in sim.app.service_names:
        got = cv.last_change(other)
        assert cv.last_change_kind(other) == (None if got is None else got[:3])
