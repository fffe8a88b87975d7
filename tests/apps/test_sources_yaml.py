"""`apps.sources.yaml_load` (libyaml first, the pure-Python parser for what it refuses) gives exactly what
PyYAML's pure-Python safe loader gives: on every YAML file the build pipeline sees in practice (the apps'
initial trees, with every change-driven fault's edit applied) and on mutated copies of those files."""

import numpy as np
import pytest
import yaml

from apps import load_app
from apps.sources import _FAST_YAML, initial_tree, yaml_load
from faults.catalogue import apply_changes, catalogue_apps, load_catalogue
from tests.sourcecases import mutate

pytestmark = pytest.mark.skipif(_FAST_YAML is None, reason="PyYAML without libyaml: yaml_load is the pure-Python loader")

YAML_EXT = (".yaml", ".yml")


def _reference(text: str, all_documents: bool):
    """(repr of the result, None) or (None, (error type, message)) of the pure-Python safe loader."""
    try:
        out = list(yaml.safe_load_all(text)) if all_documents else yaml.safe_load(text)
    except yaml.YAMLError as e:
        return None, (type(e).__name__, str(e))
    return repr(out), None


def _ours(text: str, all_documents: bool):
    try:
        out = yaml_load(text, all_documents=all_documents)
    except yaml.YAMLError as e:
        return None, (type(e).__name__, str(e))
    return repr(out), None


def _practical_texts() -> list[str]:
    texts: dict[str, None] = {}
    for name in catalogue_apps():
        app = load_app(name)
        trees = {s: initial_tree(app, s) for s in app.service_names}
        for tree in trees.values():
            texts.update(dict.fromkeys(t for p, t in sorted(tree.items()) if p.endswith(YAML_EXT)))
        for f in load_catalogue(name):
            r = f.realisation
            if r.kind != "deploy" or not r.files or not any(fc.path.endswith(YAML_EXT) for fc in r.files):
                continue
            try:
                changed = apply_changes(trees[r.service], list(r.files))
            except Exception:   # an edit that does not apply to the initial tree: nothing to parse
                continue
            texts.update(dict.fromkeys(t for p, t in sorted(changed.items()) if p.endswith(YAML_EXT)))
    return list(texts)


#: what a mutation may insert
_CHARS = [":", "-", "[", "]", "{", "}", "'", '"', "\t", "#", "&", "*", "!", "|", ">", "%", "@", "`", " ", "\n",
          ",", "?", "\\", "\x00", "é"]


def test_practical_yaml_files_parse_the_same():
    texts = _practical_texts()
    assert len(texts) > 20
    for text in texts:
        for all_docs in (False, True):
            ref = _reference(text, all_docs)
            assert ref[1] is None, "every practical YAML file parses"
            assert _ours(text, all_docs) == ref


def test_mutated_yaml_files_parse_or_fail_the_same():
    texts = _practical_texts()
    rng = np.random.default_rng(7)
    failed = 0
    for n in range(3000):
        text = texts[n % len(texts)]
        for _ in range(int(rng.integers(1, 4))):
            text = mutate(text, rng, _CHARS)
        all_docs = bool(n % 2)
        ref = _reference(text, all_docs)
        failed += ref[1] is not None
        assert _ours(text, all_docs) == ref, text
    assert failed > 100, "the mutations reach the error paths"


def test_multi_document_text_single_load_fails_like_safe_load():
    text = "a: 1\n---\nb: 2\n"
    assert _ours(text, False) == _reference(text, False)
    assert _ours(text, False)[1][0] == "ComposerError"
