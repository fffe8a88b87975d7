"""Synthetic source trees: every language renders, lints clean, passes its unit tests, and the unit
tests catch structural breakage but not subtle value faults."""

from __future__ import annotations

import ast
import re

import pytest

from apps import APP_NAMES, load_app, parse_app
from apps.sources import client_settings, config_path, initial_history, initial_tree, lint, operations, unit_tests

CODE_LANGS = ["go", "csharp", "nodejs", "python", "java", "kotlin", "cpp", "ruby", "php", "rust", "typescript"]
INFRA_LANGS = ["redis", "valkey", "postgres", "mongodb", "mysql", "kafka", "rabbitmq", "nginx", "envoy", "openresty"]
NODE = "n1"


def _svc(name, lang, port, role="service", proto="grpc", env=None):
    return {"name": name, "role": role, "language": lang, "protocol": proto,
            "ports": [{"port": port, "target_port": port, "protocol": proto}],
            "image": f"example/{name}", "tag": "1.0", "node": NODE, "env": env or {}}


def polyglot_app():
    """An app with one service per language, each calling a shared datastore and a leaf."""
    services = [_svc("gateway", "envoy", 8080, role="gateway", proto="http"),
                _svc("leaf", "go", 9000)]
    edges = [{"caller": "gateway", "callee": "leaf", "protocol": "http", "operations": ["Route"]}]
    for i, lang in enumerate(CODE_LANGS):
        name = f"svc-{lang}"
        services.append(_svc(name, lang, 7000 + i, env={"LEAF_ADDR": "leaf:9000", "MODE": "x"}))
        edges.append({"caller": name, "callee": "leaf", "protocol": "grpc", "operations": ["GetThing"],
                      "deadline_ms": 250})
        edges.append({"caller": "gateway", "callee": name, "protocol": "grpc",
                      "operations": ["Do Work", "list-items"]})
    for i, lang in enumerate(INFRA_LANGS):
        if lang in ("envoy",):
            continue
        name = f"db-{lang}"
        services.append(_svc(name, lang, 6000 + i, role="datastore", proto="tcp"))
        edges.append({"caller": "svc-go", "callee": name, "protocol": "tcp", "operations": ["Query"]})
    return parse_app({
        "name": "polyglot", "display_name": "Polyglot", "version": "1", "namespace": "poly",
        "entry_service": "gateway", "services": services, "edges": edges,
        "load": {"users": 1, "think_time_s": [1, 2],
                 "paths": [{"name": "home", "route": "/", "weight": 1,
                            "calls": [{"to": f"svc-{lang}", "op": "Do Work",
                                       "calls": [{"to": "leaf", "op": "GetThing"}]} for lang in CODE_LANGS]}]},
        "topology": {"nodes": [{"name": NODE, "zone": "z", "cpu_m": 4000, "mem_mi": 8192}]},
    })


POLY = polyglot_app()


def _all_services():
    out = [(POLY, s) for s in POLY.service_names]
    for name in APP_NAMES:
        try:
            app = load_app(name)
        except FileNotFoundError:
            continue
        out += [(app, s) for s in app.service_names]
    return out


ALL = _all_services()


@pytest.mark.parametrize("app,service", ALL, ids=[f"{a.name}/{s}" for a, s in ALL])
def test_initial_tree_is_clean_and_passes(app, service):
    tree = initial_tree(app, service)
    assert list(tree) == sorted(tree)
    assert all(not p.startswith("/") and ".." not in p for p in tree)
    assert lint(app, service, tree) == []
    results = unit_tests(app, service, tree)
    assert len(results) >= 2
    failed = [(n, m) for n, ok, m in results if not ok]
    assert failed == []
    assert config_path(app, service) in tree
    for path, text in tree.items():
        if path.endswith(".py"):
            ast.parse(text)
    # dependency addresses appear verbatim in the tree
    blob = "\n".join(tree.values())
    infra = app.service(service).language in ("envoy", "nginx", "openresty")
    for c in client_settings(app, service):
        if infra:  # proxies split host and port into their own syntax
            host, _, port = c["address"].split("//")[-1].partition(":")
            assert host in blob and port.split("/")[0] in blob
        else:
            assert c["address"] in blob


def test_deterministic():
    assert initial_tree(POLY, "svc-java") == initial_tree(POLY, "svc-java")
    assert initial_history(POLY, "svc-rust") == initial_history(POLY, "svc-rust")


@pytest.mark.parametrize("lang", CODE_LANGS)
def test_code_tree_shape(lang):
    name = f"svc-{lang}"
    tree = initial_tree(POLY, name)
    assert len(tree) >= 4  # entry, handlers, config, tests (+ build file)
    cfg = tree[config_path(POLY, name)]
    assert "leaf:9000" in cfg and "250" in cfg  # address verbatim, deadline from the edge
    assert operations(POLY, name) == ["Do Work", "list-items"]
    names = [n for n, _, _ in unit_tests(POLY, name, tree)]
    assert "handler_do_work_defined" in names and "handler_list_items_defined" in names
    assert "entrypoint_port_matches_service" in names


def _replace_in(tree, path, old, new, count=1):
    assert old in tree[path], (path, old)
    t = dict(tree)
    t[path] = tree[path].replace(old, new, count)
    return t


def _failed(app, svc, tree):
    return sorted(n for n, ok, _ in unit_tests(app, svc, tree) if not ok)


@pytest.mark.parametrize("lang", CODE_LANGS)
def test_unit_tests_catch_structural_breakage_but_not_subtle_faults(lang):
    svc = f"svc-{lang}"
    tree = initial_tree(POLY, svc)
    cfg = config_path(POLY, svc)
    text = tree[cfg]
    # subtle faults get through: wrong-but-positive timeout, typo'd host, wrong retry budget
    subtle = dict(tree)
    subtle[cfg] = text.replace("250", "25").replace("leaf:9000", "laef:9000")
    subtle[cfg] = re.sub(r"(\"?retries\"?\s*[:=]\s*)2", r"\g<1>0", subtle[cfg])
    assert subtle[cfg] != text
    assert _failed(POLY, svc, subtle) == []
    assert lint(POLY, svc, subtle) == []
    # structural faults are caught
    neg = dict(tree)
    neg[cfg] = text.replace("250", "-250")
    assert _failed(POLY, svc, neg) == ["config_leaf_timeout_positive"]
    gone = dict(tree)
    gone[cfg] = text.replace("leaf:9000", "")
    assert "config_leaf_address_defined" in _failed(POLY, svc, gone)
    missing = dict(tree)
    del missing[cfg]
    assert "config_parses" in _failed(POLY, svc, missing)
    # renaming a handler is caught
    from apps.sources import _styled, _template  # noqa: PLC0415 - test needs the template's style
    style = _template(lang)["handler_style"]
    hname = _styled("Do Work", style)
    hpath = next(p for p in tree if re.search(rf"\b{hname}\(", tree[p]) and "handler" in p.lower())
    renamed = dict(tree)
    renamed[hpath] = re.sub(rf"\b{hname}\(", hname + "Old(", tree[hpath], count=1)
    assert "handler_do_work_defined" in _failed(POLY, svc, renamed)


@pytest.mark.parametrize("lang", CODE_LANGS)
def test_port_mismatch_is_caught(lang):
    svc = f"svc-{lang}"
    tree = initial_tree(POLY, svc)
    port = str(POLY.service(svc).ports[0].target_port)
    entry = next(p for p, t in sorted(tree.items()) if re.search(rf"PORT\W+[^\n]*{port}|kDefaultPort = \"{port}", t, re.I)
                 and p != config_path(POLY, svc))
    bad = _replace_in(tree, entry, port, "1" + port[1:])
    assert "entrypoint_port_matches_service" in _failed(POLY, svc, bad)


@pytest.mark.parametrize("lang", CODE_LANGS)
def test_lint_catches_broken_syntax(lang):
    svc = f"svc-{lang}"
    tree = initial_tree(POLY, svc)
    from apps.sources import _template  # noqa: PLC0415
    from apps.sources import _fill, _values  # noqa: PLC0415
    hpath = _fill(_template(lang)["handlers_file"], _values(POLY, POLY.service(svc)))
    text = tree[hpath]
    if lang in ("python", "ruby"):
        broken = text.replace("(request)", "(request", 1)
    else:
        idx = text.rfind("}")
        broken = text[:idx] + text[idx + 1:]
    t = dict(tree)
    t[hpath] = broken
    errs = lint(POLY, svc, t)
    assert len(errs) == 1 and errs[0].startswith(hpath + ":")
    t2 = dict(tree)
    cfg = config_path(POLY, svc)
    t2[cfg] = tree[cfg] + "\n{[: broken\n"
    assert any(e.startswith(cfg + ":") for e in lint(POLY, svc, t2))


def test_lint_strings_and_comments_do_not_count():
    tree = {"a.go": 'package x\n// ( unbalanced in comment\nvar s = "}{"\n/* [ */\n',
            "b.go": 'var s = "unterminated\n', "c.js": "const x = `multi\n${y}\nline`;\n"}
    errs = lint(POLY, "svc-go", tree)
    assert errs == ["b.go: line 1: unterminated string literal"]


@pytest.mark.parametrize("lang", [lang for lang in INFRA_LANGS if lang != "envoy"])
def test_infra_trees(lang):
    svc = f"db-{lang}"
    tree = initial_tree(POLY, svc)
    cfg = config_path(POLY, svc)
    port = str(POLY.service(svc).ports[0].target_port)
    assert port in tree[cfg]
    assert _failed(POLY, svc, tree) == []
    bad = _replace_in(tree, cfg, port, "1" + port)
    assert _failed(POLY, svc, bad) == ["config_port_matches_service"]


def test_gateway_upstreams():
    tree = initial_tree(POLY, "gateway")
    cfg = config_path(POLY, "gateway")
    assert all(f"svc-{lang}" in tree[cfg] for lang in CODE_LANGS)
    assert _failed(POLY, "gateway", tree) == []
    t = dict(tree)
    t[cfg] = tree[cfg].replace("- name: svc-java\n", "- name: svc-jav\n")
    assert _failed(POLY, "gateway", t) == ["upstream_svc_java_defined"]


def test_history_shape():
    for app, svc in ALL:
        hist = initial_history(app, svc)
        assert 3 <= len(hist) <= 6
        ts = [c["t"] for c in hist]
        assert ts == sorted(ts) and ts[-1] < 0
        tree = initial_tree(app, svc)
        for c in hist:
            assert re.fullmatch(r"[0-9a-f]{40}", c["sha"])
            assert c["files"] and all(f in tree for f in c["files"])
            assert c["author"] and c["message"]
        assert len({c["sha"] for c in hist}) == len(hist)
    assert initial_history(POLY, "svc-go")[0]["sha"] != initial_history(POLY, "svc-rust")[0]["sha"]


def test_ob_frontend_ad_deadline():
    ob = load_app("online-boutique")
    ad = next(c for c in client_settings(ob, "frontend") if c["name"] == "adservice")
    assert ad["timeout_ms"] == 100 and ad["address"] == "adservice:9555"
    tree = initial_tree(ob, "frontend")
    assert "productcatalogservice:3550" in tree["config.yaml"]
    assert operations(ob, "cartservice") == ["GetCart", "AddItem", "EmptyCart"]


def test_lint_cache_keys_on_path_and_content():
    """Per-file lint results are cached by (path, content): the same broken text under two paths names each
    path, repeated lints give the same errors, and a fixed file lints clean again."""
    from apps import load_app
    from apps.sources import config_path, initial_tree, lint

    ob = load_app("online-boutique")
    tree = initial_tree(ob, "frontend")
    path = config_path(ob, "frontend")
    broken = {**tree, path: tree[path] + "clients: [unclosed\n"}
    first = lint(ob, "frontend", broken)
    assert first and all(e.startswith(path + ":") for e in first)
    assert lint(ob, "frontend", broken) == first
    other = {**broken, "extra/" + path: broken[path]}
    errs = lint(ob, "frontend", other)
    assert sorted(e.split(":")[0] for e in errs) == sorted([path, "extra/" + path])
    assert lint(ob, "frontend", tree) == []


@pytest.mark.parametrize("ext,text,want", [
    (".go", "a(b)\n/* x\n( */\nc[\n", "line 4: unclosed '['"),
    (".go", "x := `a\n(b`\n)", "line 3: unmatched ')'"),
    (".java", 's = "a\\"(";\nf(', "line 2: unclosed '('"),
    (".java", 's = "abc\n";', "line 1: unterminated string literal"),
    (".java", "// (\n/* never closed", "line 2: unterminated block comment"),
    (".sql", "-- ( ' \nSELECT ('a')\n", None),
    (".rs", "let c = 'x'; {", "line 1: unclosed '{'"),
    (".php", "# (\n// [\n{ }", None),
    (".txt", "a\n\n'(\n", "line 3: unclosed '('"),
    (".lua", 'print("a\\\\")\n)', "line 2: unmatched ')'"),
    (".js", "s = 'a\\\n(b'", None),
])
def test_balance_cases(ext, text, want):
    """Hand-checked bracket/quote/comment verdicts with the line the scanner reports."""
    from apps.sources import _balance

    assert _balance(text, ext) == want
