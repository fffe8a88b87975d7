"""Trailing comment lines: the lint and the config parser decide a text that ends in them from the text before them
(`apps.sources._comment_tail`), and that decides exactly what their definitions decide on the whole text.

- `_lint_file` (cached, with the comment-tail step) against `_lint_text` with YAML loaded as all its documents
  (the definition), verdict and message, on every file of the three apps' trees and catalogue changes with random
  comment tails, on mutated (mostly broken) copies with tails, and on hand-picked texts;
- `_parse_config` against `_parse_text`: the same value (or the same error) on every config with random tails and
  on hand-picked YAML/TOML texts that end in block scalars, plain scalars, flow collections, document markers and
  several documents.
"""

import numpy as np
import pytest

from apps import sources
from apps.sources import _comment_tail, _lint_text, _parse_text, _tail_prefixes
from tests.sourcecases import deploy_changes, mutate

_CASES = [c[:4] for c in deploy_changes(with_initial=True)]

#: characters of the comments' text: printable ASCII, the ones the linters care about among them
_TEXT = list("abc XYZ09") + ["(", ")", "[", "]", "{", "}", '"', "'", "`", "#", "//", "/*", "*/", "--", "\\", ":",
                             "- ", "---", "...", "|", ">", "&a", "*a", "!!str", "%YAML 1.1", "=", ";", "<!--", "\"\"\""]
#: lines that look like comments but are not comment lines of `_comment_tail` (a tab, a control character,
#: non-ASCII, no space after the prefix, an indented comment)
_NOT_TAIL = ["#\tx", "# \x0cx", "# \u00e9t\u00e9", "#x", " # x", "# x\r", "#"]


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return ("." + name.rsplit(".", 1)[-1].lower()) if "." in name else "." + name.lower()


def _files():
    seen: dict[tuple[str, str], None] = {}
    for _, _, tree, changed in _CASES:
        for t in (tree, changed or {}):
            for p, text in sorted(t.items()):
                seen[(p, text)] = None
    return list(seen)


def _tail(rng, prefixes, n_lines=None) -> str:
    out = []
    for _ in range(int(rng.integers(1, 4)) if n_lines is None else n_lines):
        p = prefixes[int(rng.integers(len(prefixes)))]
        words = [_TEXT[int(i)] for i in rng.integers(len(_TEXT), size=int(rng.integers(0, 8)))]
        out.append(f"{p} {''.join(words)}\n")
    return "".join(out)


@pytest.fixture
def definitions(monkeypatch):
    """The lint's definition: `_lint_text` with YAML loaded as all its documents by `yaml_load` (no cached parse)."""
    def lint_def(path, text):
        with monkeypatch.context() as m:
            m.setattr(sources, "_lint_yaml", lambda t: sources.yaml_load(t, all_documents=True))
            return _lint_text(path, text)
    sources._lint_file.cache_clear()
    sources._parse_config.cache_clear()
    yield lint_def
    sources._lint_file.cache_clear()
    sources._parse_config.cache_clear()


def _check_lint(lint_def, path, text):
    want = lint_def(path, text)
    assert sources._lint_file(path, text) == want, (path, text)
    return want


def test_comment_tail_positions():
    assert _comment_tail("", ("#",)) == -1
    assert _comment_tail("\n", ("#",)) == -1
    assert _comment_tail("# a\n", ()) == -1
    assert _comment_tail("x\n# a\n// b\n", ("#", "//")) == 2
    assert _comment_tail("x\n# a\n// b\n", ("#",)) == -1
    assert _comment_tail("x\n# a\n\n# b\n", ("#",)) == 7     # an empty line ends the run
    for line in _NOT_TAIL:
        assert _comment_tail(f"x\n{line}\n", ("#",)) == -1, line
        assert _comment_tail(f"x\n{line}\n# ok\n", ("#",)) == len(f"x\n{line}\n"), line


def test_lint_with_tails_matches_the_definition_on_practical_files(definitions):
    files = _files()
    assert len(files) > 300
    rng = np.random.default_rng(5)
    n_tail = 0
    for path, text in files:
        prefixes = _tail_prefixes(_ext(path))
        assert _check_lint(definitions, path, text) is None, "every practical file is well formed"
        if not prefixes:
            continue
        base = text if text.endswith("\n") or not text else text + "\n"
        for _ in range(2):
            t = base + _tail(rng, prefixes)
            n_tail += 1
            assert _check_lint(definitions, path, t) is None
        # a tail on a tail, and lines that are not tail lines in between
        t = base + _tail(rng, prefixes) + _NOT_TAIL[int(rng.integers(len(_NOT_TAIL)))] + "\n" + _tail(rng, prefixes)
        _check_lint(definitions, path, t)
    assert n_tail > 500
    assert {_ext(p) for p, _ in files if _tail_prefixes(_ext(p))} >= {".py", ".yaml", ".go", ".java", ".cs"}


def test_lint_with_tails_matches_the_definition_on_mutated_files(definitions):
    files = [(p, t) for p, t in _files() if _tail_prefixes(_ext(p))]
    rng = np.random.default_rng(7)
    chars = ["(", ")", "[", "]", "{", "}", '"', "'", "`", ":", "#", "\\", "\n", "*/", "/*", "\t", "- ", "|", '"""']
    bad = 0
    for n in range(3000):
        path, text = files[int(rng.integers(len(files)))]
        for _ in range(int(rng.integers(1, 3))):
            text = mutate(text, rng, chars)
        text = text if text.endswith("\n") else text + "\n"
        t = text + _tail(rng, _tail_prefixes(_ext(path)))
        bad += _check_lint(definitions, path, t) is not None
        # the same text linted before its tailed copy (the text before the tail then comes from the cache)
        _check_lint(definitions, path, text)
    assert 300 < bad < 2700, "both verdicts are reached often"


_YAML_TEXTS = [
    "", "a: 1\n", "a: |\n  x\n  y\n", "a: |\n", "a: >-\n  x\n\n", "a: |+\n  x\n\n", "- a\n- b\n", "x\n", "x\n  y\n",
    "'x\n  y'\n", "a: [1,\n  2]\n", "{a: 1}\n", "a: 1\n---\nb: 2\n", "a: 1\n...\n", "--- |\n  x\n", "--- >\n x\n",
    "%YAML 1.1\n---\na: 1\n", "a: &x 1\nb: *x\n", "a:\n  b:\n    c: 1\n", "a: 'x'\n", "? a\n: b\n", "a: 1 # c\n",
    "a: 1\n# c\n", "a: \"x\\\n  y\"\n", "a:\n", "---\n", "a: !!str 1\n", "a: b\n  c\n", "a: |2\n   x\n",
    # broken ones (the text before the tail gives no verdict)
    "a: [1\n", "a: 'x\n", "a: |\n x\n y: 1\n  z\n", "a: 1\n b: 2\n", "- a\nb: 1\n", "a: *y\n", "a: 1\n---\n- x\n]\n",
    "a:\tb\n", "\ta: 1\n",
]
_PY_TEXTS = [
    "", "x = 1\n", "x = 1\ny = 2\n", "x = 1\ny = 2\nz = 3\n", "def f():\n    pass\n", "def f():\n    return (\n        1)\n",
    's = """a\nb"""\n', "x = 1 \\\n  + 2\n", "class A:\n    x = 1\n\n\n", "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n",
    "if x:\n    y\n", "x = (\n", 'x = """\n', "x = 1 \\\n", "def f():\n", "  x = 1\n", "x = 1\n  y = 2\n",
]
_TOML_TEXTS = ["", "a = 1\n", "[t]\na = 'x'\n", "a = [\n  1,\n  2,\n]\n", 'a = """\nx\n"""\n', "a = [\n", "a = \n",
               "[[t]]\nb = {c = 1}\n"]


@pytest.mark.parametrize("path, texts", [("c.yaml", _YAML_TEXTS), ("m.py", _PY_TEXTS), ("p.toml", _TOML_TEXTS)])
def test_lint_with_tails_matches_the_definition_on_hand_picked_texts(definitions, path, texts):
    rng = np.random.default_rng(len(path))
    tails = ["# x\n", "# -*- coding: latin-1 -*-\n", "# coding: nonesuch\n", "# vim: set fileencoding=ascii :\n",
             "# type: ignore\n", "# a\n# b\n", "# ---\n", "# ...\n", "# |\n", "# '\n", '# """\n', "# ]\n"]
    for text in texts:
        for tail in tails + [_tail(rng, ("#",)) for _ in range(8)]:
            _check_lint(definitions, path, text + tail)
            _check_lint(definitions, path, text + tail + tail)
        _check_lint(definitions, path, text)


def _parse_outcome(fn, text, fmt):
    try:
        return "ok", fn(text, fmt)
    except Exception as exc:   # noqa: BLE001
        return "error", type(exc).__name__, str(exc)


@pytest.mark.parametrize("fmt, texts", [("yaml", _YAML_TEXTS), ("toml", _TOML_TEXTS)])
def test_parse_config_with_tails_matches_the_definition_on_hand_picked_texts(definitions, fmt, texts):
    rng = np.random.default_rng(3)
    for text in texts:
        for tail in ["# x\n", "# a\n# b\n", "# ---\n", "# |\n"] + [_tail(rng, ("#",)) for _ in range(6)]:
            for t in (text + tail, text + tail + text + tail):
                sources._parse_config.cache_clear()
                got = _parse_outcome(sources._parse_config, t, fmt)
                assert got == _parse_outcome(_parse_text, t, fmt), (t, got)
                # and with the text before the tail parsed (cached) first
                sources._parse_config.cache_clear()
                _parse_outcome(sources._parse_config, t[:_comment_tail(t, ("#",))], fmt)
                assert _parse_outcome(sources._parse_config, t, fmt) == _parse_outcome(_parse_text, t, fmt), t


def test_parse_config_with_tails_matches_the_definition_on_configs(definitions):
    configs = [(p, t) for p, t in _files() if _ext(p) in (".yaml", ".yml", ".toml", ".json")]
    assert len(configs) > 50
    rng = np.random.default_rng(9)
    for path, text in configs:
        fmt = {".yml": "yaml", ".yaml": "yaml", ".toml": "toml", ".json": "json"}[_ext(path)]
        for t in (text + _tail(rng, ("#",)), text + _tail(rng, ("#",)) + _tail(rng, ("#",))):
            want = _parse_outcome(_parse_text, t, fmt)
            assert _parse_outcome(sources._parse_config, t, fmt) == want, (path, t)
            if fmt != "json":
                assert want[0] == "ok"


def test_a_tailed_config_shares_the_parse_of_the_text_before():
    sources._parse_config.cache_clear()
    a = sources._parse_config("a: 1\nb: [x]\n", "yaml")
    assert sources._parse_config("a: 1\nb: [x]\n# docs: note\n# chore: more\n", "yaml") is a
    assert sources._parse_config("a: 1\nb: [x]\n#x\n", "yaml") is not a    # not a tail: parsed on its own
    sources._parse_config.cache_clear()
