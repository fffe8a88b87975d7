import pytest

from apps import load_app
from apps.sources import config_path, initial_tree
from sremarathon_env.pipeline import BuildPipeline, make_diff
from tests.sourcecases import SourcesOf

OB = load_app("online-boutique")


@pytest.fixture(scope="module")
def pipe():
    return BuildPipeline(OB)


def _edit(tree, path, old, new):
    assert old in tree[path]
    return make_diff(tree, {**tree, path: tree[path].replace(old, new, 1)})


@pytest.mark.parametrize("service", [s.name for s in OB.services])
def test_benign_comment_change_builds_for_every_service(pipe, service):
    tree = initial_tree(OB, service)
    path = sorted(tree)[0]
    # add a harmless trailing blank line: a real change that every linter accepts
    diff = make_diff(tree, {**tree, path: tree[path] + "\n"})
    r = pipe.build(service, tree, diff)
    assert r.ok, r.log
    assert r.stage_failed is None and r.changed == [path]
    assert r.files[path] == tree[path] + "\n"
    assert all(ok for _, ok, _ in r.tests) and r.tests


def test_wrong_but_plausible_value_passes_like_real_ci(pipe):
    tree = initial_tree(OB, "frontend")
    p = config_path(OB, "frontend")
    r = pipe.build("frontend", tree, _edit(tree, p, "timeout_ms: 100", "timeout_ms: 10"))
    assert r.ok, r.log
    assert "timeout_ms: 10\n" in r.files[p] or "timeout_ms: 10" in r.files[p]


def test_patch_that_does_not_apply(pipe):
    tree = initial_tree(OB, "frontend")
    p = config_path(OB, "frontend")
    diff = _edit(tree, p, "timeout_ms: 100", "timeout_ms: 10")
    r = pipe.build("frontend", {**tree, p: tree[p].replace("timeout_ms: 100", "timeout_ms: 99")}, diff)
    assert not r.ok and r.stage_failed == "apply"
    assert "[apply] FAILED" in r.log and "does not apply" in r.log
    assert r.files[p] == tree[p].replace("timeout_ms: 100", "timeout_ms: 99")  # base returned untouched


def test_unit_test_failure_rejects_with_log(pipe):
    tree = initial_tree(OB, "frontend")
    p = config_path(OB, "frontend")
    r = pipe.build("frontend", tree, _edit(tree, p, "timeout_ms: 100", "timeout_ms: -1"))
    assert not r.ok and r.stage_failed == "unit_tests"
    assert "FAIL config_adservice_timeout_positive" in r.log
    assert "config_adservice_timeout_positive" in r.to_json()["tests_failed"]


def test_python_syntax_error_caught_by_ast(pipe):
    py = next(s.name for s in OB.services if s.language == "python")
    tree = initial_tree(OB, py)
    path = next(p for p in sorted(tree) if p.endswith(".py"))
    diff = make_diff(tree, {**tree, path: tree[path] + "def broken(:\n    pass\n"})
    r = pipe.build(py, tree, diff)
    assert not r.ok and r.stage_failed == "lint"
    assert path in r.log


def test_structural_lint_for_other_languages(pipe):
    tree = initial_tree(OB, "frontend")  # go
    path = next(p for p in sorted(tree) if p.endswith(".go"))
    text = tree[path]
    i = text.rindex("}")
    diff = make_diff(tree, {**tree, path: text[:i] + text[i + 1:]})
    r = pipe.build("frontend", tree, diff)
    assert not r.ok and r.stage_failed == "lint" and "unclosed" in r.log


def test_bad_inputs_never_raise(pipe):
    tree = initial_tree(OB, "frontend")
    assert pipe.build("nope", tree, "x").stage_failed == "apply"
    assert pipe.build("frontend", tree, None).stage_failed == "apply"  # type: ignore[arg-type]
    assert pipe.build("frontend", tree, "x" * 10_000_000).stage_failed == "apply"
    assert not pipe.build("frontend", tree, "garbage").ok
    r = pipe.build("frontend", tree, make_diff(tree, tree) or "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+a\n")
    assert not r.ok


def test_build_change_results_are_kept_per_change_and_handed_out_as_copies(pipe):
    from sremarathon_env.pipeline import build as B

    tree = initial_tree(pipe.app, "frontend")
    path = config_path(pipe.app, "frontend")
    new = tree[path].replace("timeout_ms: 100", "timeout_ms: 250", 1)
    backend = SourcesOf("frontend", tree)
    first = pipe.build_change(backend, "frontend", {path: new})
    assert first.ok and first.files[path] == new
    direct = pipe.build("frontend", tree, make_diff(tree, {**tree, path: new}))
    first.files[path] = "scribbled"
    first.tests.clear()
    again = pipe.build_change(backend, "frontend", {path: new})   # from the cache: untouched by the scribbles
    assert (again.ok, again.files, again.log, again.changed, again.tests) == \
        (direct.ok, direct.files, direct.log, direct.changed, direct.tests)
    assert again.files is not first.files
    bad = pipe.build_change(backend, "frontend", {path: tree[path].replace("timeout_ms: 100", "timeout_ms: -1", 1)})
    assert not bad.ok and bad.stage_failed == "unit_tests"
    other = SourcesOf("frontend", {**tree, path: tree[path].replace("timeout_ms: 100", "timeout_ms: -1", 1)})
    fixed = pipe.build_change(other, "frontend", {path: new})   # same change, other base tree: built again
    assert fixed.ok and fixed.changed == [path]
    for i in range(B.CHANGE_CACHE + 3):   # the cache keeps the latest changes only
        pipe.build_change(backend, "frontend", {path: new.replace("timeout_ms: 250", f"timeout_ms: {300 + i}", 1)})
    assert len(B._CHANGES) == B.CHANGE_CACHE
