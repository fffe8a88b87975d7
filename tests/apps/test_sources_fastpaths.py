"""The lint's and the config parser's fast paths decide exactly what their definitions decide.

- `apps.sources._balance` (comments and literals cut out by a regex, then pair deletion) against the
  token-by-token scanner `_balance_scan`, verdict and message, on every bracket-checked file of the three
  apps' trees, with every change-driven fault's edit applied, and on mutated copies of them;
- `apps.sources.unit_tests` (results kept per file part by its text) against the one-pass definitions
  `_code_tests_of` / `_infra_tests_of`, on the apps' trees, catalogue changes and mutated trees;
- whole builds (`BuildPipeline.build`: lint messages, unit-test results, logs) of every catalogue change of
  every app, with the fast paths and with all of them replaced by their definitions.
"""

import numpy as np
import pytest

from apps import sources
from apps.sources import _balance, _balance_scan
from sremarathon_env.pipeline import BuildPipeline, make_diff
from tests.sourcecases import deploy_changes, mutate

YAML_EXT = (".yaml", ".yml")
_PARSED_EXT = {".py", ".json", ".yaml", ".yml", ".toml", ".xml", ".csproj"}


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return ("." + name.rsplit(".", 1)[-1].lower()) if "." in name else "." + name.lower()


#: (app, service, tree, changed tree or None) for every service of every app and every catalogue change
_CASES = [c[:4] for c in deploy_changes(with_initial=True)]


def _files(pred):
    seen: dict[tuple[str, str], None] = {}
    for _, _, tree, changed in _CASES:
        for t in (tree, changed or {}):
            for p, text in sorted(t.items()):
                if pred(p):
                    seen[(_ext(p), text)] = None
    return list(seen)


# ------------------------------------------------------------------------------------------- _balance
_BALANCE_CHARS = ["(", ")", "[", "]", "{", "}", '"', "'", "`", "/", "*", "/*", "*/", "//", "#", "--", "\\", "\n",
                  "\\\n", '\\"', " ", "x"]


def test_balance_fast_path_matches_the_scanner_on_practical_files():
    files = _files(lambda p: _ext(p) not in _PARSED_EXT)
    assert len(files) > 100
    assert len({e for e, _ in files}) >= 8, "several languages"
    for ext, text in files:
        assert _balance_scan(text, ext) is None, "every practical file is well formed"
        assert _balance(text, ext) is None


def test_balance_fast_path_matches_the_scanner_on_mutated_files():
    files = _files(lambda p: _ext(p) not in _PARSED_EXT)
    rng = np.random.default_rng(11)
    bad = 0
    for n in range(6000):
        ext, text = files[n % len(files)]
        for _ in range(int(rng.integers(1, 4))):
            text = mutate(text, rng, _BALANCE_CHARS)
        want = _balance_scan(text, ext)
        bad += want is not None
        assert _balance(text, ext) == want, (ext, text)
    assert 1000 < bad < 5000, "both verdicts are reached often"


@pytest.mark.parametrize("ext", [".go", ".java", ".js", ".rs", ".php", ".sql", ".txt", ".lua", ".conf", ".mod",
                                 ".cs", ".gradle", ".rb", ".dockerfile", ".kts"])
def test_balance_fast_path_matches_the_scanner_on_random_texts(ext):
    alphabet = ["(", ")", "[", "]", "{", "}", '"', "'", "`", "/", "*", "#", "-", "\\", "\n", " ", "a"]
    rng = np.random.default_rng(abs(hash(ext)) % 2**32)
    for n in range(3000):
        text = "".join(alphabet[i] for i in rng.integers(len(alphabet), size=int(rng.integers(0, 24))))
        assert _balance(text, ext) == _balance_scan(text, ext), (ext, text)
    # well-formed ones, built from balanced pieces (random texts are mostly broken)
    pieces = ["()", "[]", "{}", '"a(\\"b"', "'c'", "// ({\n", "/* ] */", "x", "\n", "-- ) \n", "# [\n", "`\n(`"]
    for n in range(3000):
        parts = [pieces[i] for i in rng.integers(len(pieces), size=int(rng.integers(0, 12)))]
        depth = int(rng.integers(0, 5))
        text = "(" * depth + "".join(parts) + ")" * depth
        assert _balance(text, ext) == _balance_scan(text, ext), (ext, text)


def test_balance_deep_nesting_goes_to_the_scanner():
    for depth in (63, 64, 65, 200):
        text = "{" * depth + "}" * depth
        assert _balance(text, ".java") is None
        assert _balance(text + ")", ".java") == _balance_scan(text + ")", ".java") == "line 1: unmatched ')'"


# ------------------------------------------------------------------------------------------- whole builds
def _build_all():
    out = []
    for app, service, tree, changed in _CASES:
        if changed is None:
            continue
        pipe = BuildPipeline(app)
        r = pipe.build(service, tree, make_diff(tree, changed))
        out.append((r.ok, r.stage_failed, r.log, r.changed, r.tests, sorted(r.files.items())))
        # and a broken variant of every changed file (lint and unit-test failures with messages)
        for p in sorted(set(changed) - set(tree) | {q for q in tree if tree[q] != changed.get(q)}):
            text = changed[p]
            for cut in (len(text) // 3, len(text) // 2):
                broken = {**changed, p: text[:cut] + text[cut + 1:]}
                r = pipe.build(service, tree, make_diff(tree, broken))
                out.append((r.ok, r.stage_failed, r.log, r.changed, r.tests, sorted(r.files.items())))
    return out


def test_builds_of_catalogue_changes_match_the_definitions(monkeypatch):
    sources._PART_TESTS.clear()
    sources._lint_file.cache_clear()
    sources._parse_config.cache_clear()
    fast = _build_all()
    assert len(fast) > 150
    assert {x[1] for x in fast} >= {None, "lint", "unit_tests"}
    monkeypatch.setattr(sources, "_balance", sources._balance_scan)
    monkeypatch.setattr(sources, "_code_tests", sources._code_tests_of)
    monkeypatch.setattr(sources, "_infra_tests", sources._infra_tests_of)
    monkeypatch.setattr(sources, "_lint_yaml", lambda text: sources.yaml_load(text, all_documents=True))
    sources._lint_file.cache_clear()
    sources._parse_config.cache_clear()
    try:
        slow = _build_all()
    finally:
        sources._lint_file.cache_clear()
        sources._parse_config.cache_clear()
    assert fast == slow


# ------------------------------------------------------------------------------------------- unit tests per part
def _definition(app, service, tree):
    svc = app.service(service)
    tpl = sources._template_for(svc)
    if tpl.get("kind") == "infra":
        return sources._infra_tests_of(app, service, tree, tpl)
    return sources._code_tests_of(app, service, tree, tpl)


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:   # noqa: BLE001 - the same exception either way
        return None, (type(e).__name__, str(e))


def test_unit_tests_per_part_match_the_definition():
    rng = np.random.default_rng(13)
    sources._PART_TESTS.clear()
    n_failed = 0
    for app, service, tree, changed in _CASES:
        variants = [tree] + ([changed] if changed is not None else [])
        t = dict(changed or tree)
        paths = sorted(t)
        for _ in range(4):                                   # mutated trees: edits, deletions, emptied files
            p = paths[int(rng.integers(len(paths)))]
            k = int(rng.integers(4))
            if k == 0:
                t = {q: x for q, x in t.items() if q != p}
            elif k == 1:
                t = {**t, p: ""}
            elif k == 2:
                t = {**t, p: mutate(t[p], rng, _BALANCE_CHARS + ["-", "0", "9", ":"])} if p in t else t
            else:
                t = {**t, p: t[p].replace("0", "", 1)} if p in t else t
            variants.append(t)
        for v in variants:
            want = _definition(app, service, v)
            n_failed += not all(ok for _, ok, _ in want)
            for _ in range(2):                               # computed, then found
                got = sources.unit_tests(app, service, v)
                assert got == want and [type(ok) for _, ok, _ in got] == [type(ok) for _, ok, _ in want]
                got.append(("scribbled", False, ""))         # a caller's list is its own
    assert n_failed > 100
    assert 0 < len(sources._PART_TESTS) <= sources.PART_TESTS_MAX


def test_unit_tests_non_text_values_go_to_the_definition():
    for app, service, tree, changed in _CASES[:40]:
        for p in sorted(tree):
            bad = {**tree, p: ["not", "text"]}
            assert _outcome(sources.unit_tests, app, service, bad) == _outcome(_definition, app, service, bad)


def test_part_results_are_bounded_and_per_app(monkeypatch):
    monkeypatch.setattr(sources, "PART_TESTS_MAX", 8)
    sources._PART_TESTS.clear()
    app, service, tree, _ = next(c for c in _CASES if c[3] is None and not
                                 sources._template_for(c[0].service(c[1])).get("kind") == "infra")
    for i in range(20):
        cfg = sources.config_path(app, service)
        sources.unit_tests(app, service, {**tree, cfg: tree[cfg] + f"# {i}\n"})
        assert len(sources._PART_TESTS) <= 8
    other = app.model_copy(deep=True)                        # an equal app under another id: its own entries
    assert sources.unit_tests(other, service, tree) == sources.unit_tests(app, service, tree)
    sources._PART_TESTS.clear()


# ------------------------------------------------------------------------------------------- YAML lint
_YAML_CHARS = [":", "-", "[", "]", "{", "}", "'", '"', "\t", "#", "&", "*", "!", "|", ">", "%", "@", "`", " ", "\n",
               ",", "?", "\\", "\x00", "é", "0", "1", ".", "e", "_", "y", "on", "null", "~", "\r", "\x7f"]


def _yaml_verdict(fn, text):
    try:
        fn(text)
    except Exception as e:   # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def test_yaml_lint_through_the_config_parser_matches_the_multi_document_load():
    texts = [t for _, t in _files(lambda p: p.endswith(YAML_EXT))]
    texts += ["", "a: 1\n---\nb: 2\n", "---\na: 1\n", "a: [1\n", "a: 1\n...\n", "- 1\n- 2\n", "x\n---\n[",
              "a:\tb\n", "%YAML 1.1\n---\na: 1\n", "a: 1\n---\n", "a: !!int x\n", "? [a]\n: 1\n"]
    rng = np.random.default_rng(8)
    for n in range(3000):
        text = texts[n % len(texts)]
        for _ in range(int(rng.integers(1, 3))):
            text = mutate(text, rng, _YAML_CHARS + ["---\n", "...\n"])
        texts.append(text)
    bad = 0
    for text in texts:
        sources._parse_config.cache_clear()
        want = _yaml_verdict(lambda t: sources.yaml_load(t, all_documents=True), text)
        bad += want is not None
        assert _yaml_verdict(sources._lint_yaml, text) == want, text
        assert _yaml_verdict(sources._lint_yaml, text) == want, text      # with the parse cached
    assert 300 < bad < len(texts) - 300
