"""Synthetic source trees, commit histories, unit tests and lint for every service of an app.

Each service of an `AppSpec` gets a small, deterministic source tree in its own language, rendered
from the templates in ``apps/templates/<language>.yaml`` (datastores, brokers and proxies get a
config-file tree instead). Every code tree has an entry point that holds the listen port, a
handlers file with one handler per operation the service serves, a client config that holds the
dependency addresses, timeouts, retry budgets and pool sizes, and a unit-test file. Change-driven
faults are diffs to these trees; they pass through the build pipeline, which runs `lint` and
`unit_tests`. The unit tests check structure (keys present, numbers positive, handlers defined, port
right), so a wrong-but-plausible value (a timeout of 10 ms instead of 100 ms, a typo'd host name,
a retry budget of 0) gets through, exactly as in real life.

>>> from apps import load_app
>>> from apps.sources import initial_tree, unit_tests, lint, config_path
>>> ob = load_app("online-boutique")
>>> tree = initial_tree(ob, "frontend")
>>> config_path(ob, "frontend") in tree and "adservice:9555" in tree[config_path(ob, "frontend")]
True
>>> all(ok for _, ok, _ in unit_tests(ob, "frontend", tree)), lint(ob, "frontend", tree)
(True, [])
>>> broken = dict(tree); broken[config_path(ob, "frontend")] = tree[config_path(ob, "frontend")].replace("timeout_ms: 100", "timeout_ms: -1")
>>> [name for name, ok, _ in unit_tests(ob, "frontend", broken) if not ok]
['config_adservice_timeout_positive']
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from apps.spec import AppSpec, Call, ServiceSpec

TEMPLATE_DIR = Path(__file__).parent / "templates"

# Languages rendered from a config-file template instead of a code template.
INFRA_LANGUAGES = frozenset({"redis", "valkey", "postgres", "mongodb", "mysql", "kafka", "rabbitmq",
                             "nginx", "envoy", "openresty"})

# Per-protocol client defaults: (timeout_ms, retries, pool_size).
_CLIENT_DEFAULTS = {
    "grpc": (2000, 2, 4), "http": (3000, 2, 20), "tcp": (1000, 1, 8), "resp": (500, 1, 16),
    "sql": (5000, 1, 10), "mongo": (3000, 1, 10), "kafka": (10000, 3, 1), "amqp": (5000, 3, 2),
}

_AUTHORS = ("Ana Ruiz", "Bo Chen", "Chidi Okafor", "Dana Levi", "Emil Novak", "Farah Haddad",
            "Goran Petrov", "Hana Sato", "Ivan Duarte", "Jun Park", "Kiri Walker", "Lena Vogel")


# ---------------------------------------------------------------------------------------------
# naming helpers
def _words(text: str) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", text) if w]
    if not words:
        words = ["handle"]
    if words[0][0].isdigit():
        words = ["op", *words]
    return words


def _snake(text: str) -> str:
    return "_".join(_words(text))


def _pascal(text: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in _words(text))


def _camel(text: str) -> str:
    p = _pascal(text)
    return p[:1].lower() + p[1:]


def _styled(text: str, style: str) -> str:
    return {"snake": _snake, "pascal": _pascal, "camel": _camel}[style](text)


def _fill(template: str, values: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(f"template placeholder {{{{{key}}}}} has no value")
        return str(values[key])

    return re.sub(r"\{\{(\w+)\}\}", sub, template)


@lru_cache(maxsize=None)
def _template(language: str) -> dict:
    path = TEMPLATE_DIR / f"{language}.yaml"
    if not path.exists():
        raise ValueError(f"no source template for language {language!r} ({path.name} missing)")
    return yaml.safe_load(path.read_text())


def _template_for(svc: ServiceSpec) -> dict:
    lang = svc.language
    if lang == "valkey":
        lang = "redis"
    if lang == "openresty":
        lang = "nginx"
    return _template(lang)


# ---------------------------------------------------------------------------------------------
# facts about one service, derived from the AppSpec
def operations(app: AppSpec, service: str) -> list[str]:
    """Operations the service serves: edge operations where it is the callee, in declaration order.
    The entry service serves the load paths; a service nobody calls serves ``Handle``."""
    ops: list[str] = []
    if service == app.entry_service:
        ops.extend(p.name for p in app.load.paths)
    for e in app.edges:
        if e.callee == service:
            ops.extend(e.operations or [f"Handle{_pascal(e.caller)}"])
    seen: list[str] = []
    idents: set[str] = set()
    for op in ops:
        if _snake(op) not in idents:
            idents.add(_snake(op))
            seen.append(op)
    return seen or ["Handle"]


def _op_calls(app: AppSpec, service: str) -> dict[str, list[tuple[str, str]]]:
    """For each operation of ``service``: the (callee, op) calls it makes, from the load paths."""
    out: dict[str, list[tuple[str, str]]] = {}

    def add(svc: str, op: str, calls: list[Call]) -> None:
        if svc == service:
            lst = out.setdefault(op, [])
            for c in calls:
                if (c.to, c.op) not in lst:
                    lst.append((c.to, c.op))
        for c in calls:
            add(c.to, c.op, c.calls)

    for p in app.load.paths:
        add(app.entry_service, p.name, p.calls)
    return out


def _addr_env(svc: ServiceSpec, callee: str) -> str | None:
    pat = re.compile(rf"(^|//|@){re.escape(callee)}(:|/|$)")
    for key in sorted(svc.env):
        if pat.search(svc.env[key]):
            return key
    return None


def client_settings(app: AppSpec, service: str) -> list[dict[str, Any]]:
    """The client config of ``service``: one entry per dependency (callee, or broker it consumes
    from), with ``name``, ``address``, ``env``, ``timeout_ms``, ``retries``, ``pool_size``."""
    svc = app.service(service)
    deps: list[tuple[str, str, float | None]] = []
    for e in app.edges:
        if e.caller == service and not (svc.role == "broker" and e.asynchronous):  # a broker's consumers dial it
            deps.append((e.callee, e.protocol, e.deadline_ms))
    for e in app.edges:
        if e.callee == service and e.asynchronous and app.service(e.caller).role == "broker":
            if all(d[0] != e.caller for d in deps):
                deps.append((e.caller, e.protocol, None))
    out = []
    for callee, proto, deadline in deps:
        env_key = _addr_env(svc, callee)
        if env_key is not None:
            address = svc.env[env_key]
            if not re.search(r":\d+", address):  # a bare host (FLAGD_HOST=flagd): add the port
                port_key = re.sub(r"_(HOST|ADDR|ADDRESS)$", "_PORT", env_key)
                port = svc.env.get(port_key) if port_key != env_key else None
                address = f"{address}:{port or app.service(callee).ports[0].port}"
        else:
            target = app.service(callee)
            address = f"{callee}:{target.ports[0].port}"
            if proto == "http" and svc.protocol == "http" or proto == "http" and svc.role == "gateway":
                address = f"http://{address}"
            env_key = f"{_snake(callee).upper()}_ADDR"
        timeout, retries, pool = _CLIENT_DEFAULTS[proto]
        if deadline is not None:
            timeout = deadline
        out.append({"name": callee, "address": address, "env": env_key,
                    "timeout_ms": int(timeout) if float(timeout).is_integer() else timeout,
                    "retries": retries, "pool_size": pool})
    return out


def _settings(app: AppSpec, service: str) -> dict[str, str]:
    svc = app.service(service)
    used = {c["env"] for c in client_settings(app, service)}
    return {k: svc.env[k] for k in sorted(svc.env) if k not in used and k != "PORT"}


def _port(svc: ServiceSpec) -> int:
    return svc.ports[0].target_port


# ---------------------------------------------------------------------------------------------
# config rendering (line oriented, stable, easy to diff)
def _q(v: Any) -> str:
    return json.dumps(v) if isinstance(v, str) else str(v)


def _render_config(app: AppSpec, service: str, fmt: str) -> str:
    svc = app.service(service)
    clients = client_settings(app, service)
    settings = _settings(app, service)
    port = _port(svc)
    if fmt == "json":
        doc = {"service": service, "port": port,
               "clients": {c["name"]: {k: c[k] for k in ("address", "env", "timeout_ms", "retries", "pool_size")}
                           for c in clients},
               "settings": settings}
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "toml":
        lines = [f"# client configuration of {service} ({app.display_name})", f"service = {_q(service)}",
                 f"port = {port}", ""]
        if settings:
            lines.append("[settings]")
            lines += [f"{json.dumps(k)} = {_q(v)}" for k, v in settings.items()]
            lines.append("")
        for c in clients:
            lines.append(f"[clients.{json.dumps(c['name'])}]")
            lines += [f"{k} = {_q(c[k])}" for k in ("address", "env", "timeout_ms", "retries", "pool_size")]
            lines.append("")
        return "\n".join(lines)
    lines = [f"# client configuration of {service} ({app.display_name}); env vars override addresses",
             f"service: {_q(service)}", f"port: {port}"]
    lines.append("clients:" + ("" if clients else " {}"))
    for c in clients:
        lines.append(f"  {c['name']}:")
        lines += [f"    {k}: {_q(c[k])}" for k in ("address", "env", "timeout_ms", "retries", "pool_size")]
    lines.append("settings:" + ("" if settings else " {}"))
    lines += [f"  {k}: {_q(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1024)
def _parse_config(text: str, fmt: str) -> Any:
    """The parsed config file, cached by content (the same trees are built again and again: every fault
    of a run and every run of a process). The result is shared: callers only read it.

    A YAML or TOML text that ends in comment lines (`_comment_tail`: benign deploys append one to a file, so a
    run's config texts are those of other runs plus such lines) is what the text before them parses to, where
    that parses: a comment line at the start of a line, after a complete document, adds no token to the stream
    (tests/apps/test_sources_comment_tail.py holds the two to the same value, or the same error, on the apps'
    configs with random comment tails and on hand-picked texts that end in block scalars, plain scalars, flow
    collections, document markers and several documents).

    >>> _parse_config("a: 1\\n# docs: a note\\n", "yaml") is _parse_config("a: 1\\n", "yaml")
    True
    """
    if fmt == "yaml" or fmt == "toml":
        i = _comment_tail(text, ("#",))
        if i >= 0:
            try:
                return _parse_config(text[:i], fmt)
            except Exception:   # noqa: BLE001 - no verdict from the text before: the whole text is parsed
                pass
    return _parse_text(text, fmt)


def _parse_text(text: str, fmt: str) -> Any:
    """The definition of `_parse_config`: the text parsed in its format (a fresh result, not kept)."""
    if fmt == "json":
        return json.loads(text)
    if fmt == "toml":
        return tomllib.loads(text)
    return yaml_load(text)


#: libyaml's parser where PyYAML was built with it (~7x faster on these files), else the pure-Python one
_FAST_YAML = getattr(yaml, "CSafeLoader", None)


def yaml_load(text: str, *, all_documents: bool = False) -> Any:
    """``yaml.safe_load(text)`` (``list(yaml.safe_load_all(text))`` with ``all_documents``), errors included:
    libyaml's parser first (the same safe constructor and resolver, so the same objects); a text it refuses,
    or one with a tab (which libyaml accepts inside plain scalars where PyYAML does not), is parsed by the
    pure-Python parser, whose verdict and error message are the ones given.
    (tests/apps/test_sources_yaml.py holds the two to the same results on every YAML file of the three apps'
    trees and on thousands of mutated ones.)

    >>> yaml_load("a: 1\\nb: [x, 2]\\n")
    {'a': 1, 'b': ['x', 2]}
    >>> yaml_load("a: 1\\n---\\nb: 2\\n", all_documents=True)
    [{'a': 1}, {'b': 2}]
    >>> try:
    ...     yaml_load("a: [1\\n")
    ... except yaml.YAMLError as e:
    ...     print(type(e).__name__, e.problem)
    ParserError expected ',' or ']', but got '<stream end>'
    """
    if _FAST_YAML is not None and "\t" not in text:   # libyaml takes tabs inside plain scalars, PyYAML refuses
        try:
            if all_documents:
                return list(yaml.load_all(text, Loader=_FAST_YAML))
            return yaml.load(text, Loader=_FAST_YAML)
        except yaml.YAMLError:
            pass
    return list(yaml.safe_load_all(text)) if all_documents else yaml.safe_load(text)


# ---------------------------------------------------------------------------------------------
# tree rendering
def _values(app: AppSpec, svc: ServiceSpec) -> dict[str, str]:
    app_ident = _snake(app.name)
    svc_ident = _snake(svc.name)
    return {
        "app": app.name, "app_display": app.display_name, "app_ident": app_ident, "namespace": app.namespace,
        "service": svc.name, "service_ident": svc_ident, "service_pascal": _pascal(svc.name),
        "service_camel": _camel(svc.name), "service_upper": svc_ident.upper(),
        "port": str(_port(svc)), "service_port": str(svc.ports[0].port), "protocol": svc.protocol,
        "version": svc.tag, "image": f"{svc.image}:{svc.tag}",
        "package": f"sremarathon.{app_ident}.{svc_ident}", "package_path": f"sremarathon/{app_ident}/{svc_ident}",
        "mem_limit_mi": str(svc.resources.mem_limit_mi or svc.resources.mem_request_mi or 256),
        "maxmemory_mb": str(max(8, int((svc.resources.mem_limit_mi or 256) * 0.75))),
    }


# fragments rendered once per dependency or per call; every other fragment X is rendered once per
# handler and joined into the placeholder {{Xs}} (handler -> {{handlers}}, test_case -> {{test_cases}}).
_SHARED_FRAGMENTS = frozenset({"client", "call", "call_soft", "upstream"})


def _soft(app: AppSpec, caller: str, callee: str) -> bool:
    try:
        e = app.edge(caller, callee)
    except KeyError:
        return False
    return e.on_error != "fail" or e.asynchronous


def _render_code(app: AppSpec, svc: ServiceSpec, tpl: dict) -> dict[str, str]:
    base = _values(app, svc)
    frag = tpl["fragments"]
    style = tpl["handler_style"]
    op_calls = _op_calls(app, svc.name)
    per_handler = sorted(k for k in frag if k not in _SHARED_FRAGMENTS)
    rendered: dict[str, list[str]] = {k: [] for k in per_handler}
    clients = []
    for op in operations(app, svc.name):
        calls = "".join(
            _fill(frag.get("call_soft", frag["call"]) if _soft(app, svc.name, to) else frag["call"], {**base, "callee": to, "callee_ident": _snake(to), "callee_pascal": _pascal(to),
                                 "callee_camel": _camel(to), "op": cop or "call", "op_snake": _snake(cop or "call"),
                                 "op_pascal": _pascal(cop or "call"), "op_camel": _camel(cop or "call")})
            for to, cop in op_calls.get(op, []))
        hv = {**base, "name": _styled(op, style), "op": op, "calls": calls, "name_snake": _snake(op),
              "name_pascal": _pascal(op), "name_camel": _camel(op)}
        for key in per_handler:
            rendered[key].append(_fill(frag[key], hv))
    for c in client_settings(app, svc.name):
        clients.append(_fill(frag["client"], {**base, "callee": c["name"], "callee_ident": _snake(c["name"]),
                                              "callee_pascal": _pascal(c["name"]), "callee_camel": _camel(c["name"]),
                                              "env": c["env"]}))
    values = {**base, **{f"{k}s": "".join(v) for k, v in rendered.items()}, "clients": "".join(clients),
              "config_path": _fill(tpl["config"]["path"], base)}
    tree = {_fill(path, base): _fill(body, values) for path, body in tpl["files"].items()}
    tree[values["config_path"]] = _render_config(app, svc.name, tpl["config"]["format"])
    return tree


def _render_infra(app: AppSpec, svc: ServiceSpec, tpl: dict) -> dict[str, str]:
    base = _values(app, svc)
    clients = client_settings(app, svc.name)
    frag = tpl.get("fragments", {})
    rendered: dict[str, list[str]] = {k: [] for k in sorted(frag)}
    for c in clients:
        host, _, port = c["address"].split("//")[-1].partition(":")
        port = port.split("/")[0] or str(app.service(c["name"]).ports[0].port)
        short = re.sub(r"^ts-|-service$", "", c["name"]).replace("-", "")
        cv = {**base, "callee": c["name"], "callee_ident": _snake(c["name"]), "host": host, "upstream_port": port,
              "route_prefix": f"/api/v1/{short}service" if c["name"].startswith("ts-") else f"/{c['name']}/",
              "timeout_s": f"{c['timeout_ms'] / 1000:g}", "timeout_ms": str(c["timeout_ms"]),
              "retries": str(c["retries"])}
        for k in rendered:
            rendered[k].append(_fill(frag[k], cv))
    values = {**base, **{f"{k}s": "".join(v) for k, v in rendered.items()}}
    return {_fill(path, base): _fill(body, values) for path, body in tpl["files"].items()}


def initial_tree(app: AppSpec, service: str) -> dict[str, str]:
    """The service's source tree at the marathon start: relative path -> file text, sorted by path."""
    svc = app.service(service)
    tpl = _template_for(svc)
    tree = _render_infra(app, svc, tpl) if tpl.get("kind") == "infra" else _render_code(app, svc, tpl)
    return {k: tree[k] for k in sorted(tree)}


def config_path(app: AppSpec, service: str) -> str:
    """Path of the file in the service's tree that holds its client config (or its main config)."""
    svc = app.service(service)
    tpl = _template_for(svc)
    return _fill(tpl["config"]["path"], _values(app, svc))


# ---------------------------------------------------------------------------------------------
# commit history
_HISTORY_STEPS = (
    ("initial import of {service}", "all"),
    ("{service}: tune client timeouts after load test", "config"),
    ("{service}: add unit tests for handlers", "test"),
    ("{service}: structured logging in handlers", "handlers"),
    ("{service}: bump base image to {version}", "build"),
    ("{service}: read dependency addresses from env first", "entry"),
)


def initial_history(app: AppSpec, service: str) -> list[dict]:
    """3-6 past commits of the service (oldest first); ``t`` is seconds before the marathon start."""
    svc = app.service(service)
    tree = initial_tree(app, service)
    paths = list(tree)
    h = hashlib.sha256(f"{app.name}/{service}/history".encode()).digest()
    n = 3 + h[0] % 4
    tpl = _template_for(svc)
    cfg = config_path(app, service)
    roles = {
        "all": paths, "config": [cfg],
        "test": [p for p in paths if p == _fill(tpl.get("test_file", ""), _values(app, svc))] or paths[-1:],
        "handlers": [p for p in paths if p == _fill(tpl.get("handlers_file", ""), _values(app, svc))] or [cfg],
        "entry": [p for p in paths if p == _fill(tpl.get("entry", ""), _values(app, svc))] or [cfg],
        "build": [p for p in paths if p == _fill(tpl.get("build_file", ""), _values(app, svc))] or paths[:1],
    }
    commits = []
    t = -float(20 * 86400 + (h[1] * 256 + h[2]) * 60)  # 20-65 days back
    parent = "0" * 40
    for i in range(n):
        msg_t, role = _HISTORY_STEPS[i]
        message = msg_t.format(service=service, version=svc.tag)
        author = _AUTHORS[h[3 + i] % len(_AUTHORS)]
        files = sorted(roles[role])
        body = "\n".join([parent, author, message, str(int(t)), *files,
                          *(hashlib.sha1(tree[f].encode()).hexdigest() for f in files)])
        sha = hashlib.sha1(body.encode()).hexdigest()
        commits.append({"sha": sha, "author": author, "message": message, "t": float(int(t)), "files": files})
        parent = sha
        t += float((2 + h[10 + i] % 9) * 86400 + h[16 + i] * 97)
        if t >= -3600:
            t = -3600.0 * (n - i)
    return commits


# ---------------------------------------------------------------------------------------------
# unit tests (run by the build pipeline on a possibly patched tree)
def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_ADDR_RE = re.compile(r"^([a-z][a-z0-9+.-]*://)?([^@/\s]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:\d{1,5}([/?].*)?$")


#: (id(app), service) -> (app, plan): what a service's code unit tests look for, derived from the AppSpec once
#: (the AppSpec is read-only; the entry keeps the object so that a reused id never hits a stale plan)
_CODE_PLANS: dict[tuple[int, str], tuple[AppSpec, dict]] = {}


def _code_plan(app: AppSpec, service: str, tpl: dict) -> dict:
    key = (id(app), service)
    hit = _CODE_PLANS.get(key)
    if hit is not None and hit[0] is app:
        return hit[1]
    svc = app.service(service)
    base = _values(app, svc)
    handlers = []
    for op in operations(app, service):
        name = _styled(op, tpl["handler_style"])
        handlers.append((f"handler_{_snake(op)}_defined", name,
                         re.compile(_fill(tpl["handler_def"], {"name": re.escape(name)}), re.M)))
    plan = {
        "cfg_path": config_path(app, service), "fmt": tpl["config"]["format"], "want_port": _port(svc),
        "clients": [(c["name"], _snake(c["name"])) for c in client_settings(app, service)],
        "entry_path": _fill(tpl["entry"], base), "port_def": re.compile(tpl["port_def"]),
        "hpath": _fill(tpl["handlers_file"], base), "tpath": _fill(tpl["test_file"], base), "handlers": handlers,
    }
    if len(_CODE_PLANS) > 512:
        _CODE_PLANS.clear()
    _CODE_PLANS[key] = (app, plan)
    return plan


#: (id(app), service, part, text of the part's file) -> (app, results): the unit tests of one part of a tree (a code
#: tree's config, entry point, handlers file and test file; an infra tree's config), each a pure function of the
#: app, the service and that one file's text (None: missing). A build changes one file of a tree, so the other
#: parts' results are found here. The entry keeps the app so that a reused id never hits a stale result.
_PART_TESTS: dict[tuple, tuple[AppSpec, tuple[tuple[str, bool, str], ...]]] = {}
PART_TESTS_MAX = 2048


def _part_tests(app: AppSpec, service: str, part: str, text: str | None, compute) -> tuple[tuple[str, bool, str], ...]:
    key = (id(app), service, part, text)
    hit = _PART_TESTS.get(key)
    if hit is not None and hit[0] is app:
        return hit[1]
    res = tuple(compute(text))
    if len(_PART_TESTS) >= PART_TESTS_MAX:
        del _PART_TESTS[next(iter(_PART_TESTS))]   # the oldest entry
    _PART_TESTS[key] = (app, res)
    return res


def _code_tests(app: AppSpec, service: str, tree: dict[str, str], tpl: dict) -> list[tuple[str, bool, str]]:
    """The code tree's unit tests: its config's, its entry point's, its handlers', its test file's, in this order,
    each part's results kept by its file's text (`_code_tests_of` is the definition: the same tests in one pass;
    a tree with a non-text value at one of these paths goes there)."""
    plan = _code_plan(app, service, tpl)
    if not all(isinstance(tree.get(p, ""), str) for p in (plan["cfg_path"], plan["entry_path"], plan["hpath"], plan["tpath"])):
        return _code_tests_of(app, service, tree, tpl)
    res = list(_part_tests(app, service, "config", tree.get(plan["cfg_path"]), lambda t: _config_tests(plan, t)))
    res += _part_tests(app, service, "entry", tree.get(plan["entry_path"]), lambda t: _entry_tests(plan, t))
    res += _part_tests(app, service, "handlers", tree.get(plan["hpath"], ""), lambda t: _handler_tests(plan, t))
    res += _part_tests(app, service, "test", tree.get(plan["tpath"]), lambda t: _test_file_tests(plan, t))
    return res


def _code_tests_of(app: AppSpec, service: str, tree: dict[str, str], tpl: dict) -> list[tuple[str, bool, str]]:
    """The definition of `_code_tests` (one pass over the tree; the config's tests are `_config_tests`, which reads
    only the config's text)."""
    plan = _code_plan(app, service, tpl)
    res = _config_tests(plan, tree.get(plan["cfg_path"]))
    want_port = plan["want_port"]
    entry_path = plan["entry_path"]
    etext = tree.get(entry_path, "")
    m = plan["port_def"].search(etext)
    got = m.group(1) if m else None
    res.append(("entrypoint_port_matches_service", got == str(want_port),
                f"{entry_path}: default port {got!r}, Service targets {want_port}" if entry_path in tree
                else f"{entry_path} is missing"))
    hpath = plan["hpath"]
    htext = tree.get(hpath, "")
    tpath = plan["tpath"]
    ttext = tree.get(tpath)
    for test_name, name, pat in plan["handlers"]:
        ok = pat.search(htext) is not None
        res.append((test_name, ok, f"{hpath}: handler {name} " + ("defined" if ok else "not defined")))
    res.append(("unit_test_file_present", ttext is not None and len(ttext.strip()) > 0, tpath))
    return res


def _config_tests(plan: dict, text: str | None) -> list[tuple[str, bool, str]]:
    res: list[tuple[str, bool, str]] = []
    cfg_path = plan["cfg_path"]
    cfg: Any = None
    if text is None:
        res.append(("config_parses", False, f"{cfg_path} is missing"))
    else:
        try:
            cfg = _parse_config(text, plan["fmt"])
            ok = isinstance(cfg, dict)
            res.append(("config_parses", ok, "ok" if ok else f"{cfg_path}: top level is not a mapping"))
        except Exception as exc:  # noqa: BLE001 - any parse error is a test failure
            res.append(("config_parses", False, f"{cfg_path}: {type(exc).__name__}: {exc}"))
    if not isinstance(cfg, dict):
        cfg = {}
    want_port = plan["want_port"]
    res.append(("config_port_matches_service", cfg.get("port") == want_port,
                f"port {cfg.get('port')!r}, Service targets {want_port}"))
    clients = cfg.get("clients") if isinstance(cfg.get("clients"), dict) else {}
    for n, ident in plan["clients"]:
        entry = clients.get(n)
        entry = entry if isinstance(entry, dict) else {}
        addr = entry.get("address")
        res.append((f"config_{ident}_address_defined", isinstance(addr, str) and bool(_ADDR_RE.match(addr)),
                    f"{n}.address = {addr!r}"))
        t = entry.get("timeout_ms")
        res.append((f"config_{ident}_timeout_positive", _num(t) and t > 0, f"{n}.timeout_ms = {t!r}"))
        r = entry.get("retries")
        res.append((f"config_{ident}_retries_valid", isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= 10,
                    f"{n}.retries = {r!r}"))
        p = entry.get("pool_size")
        res.append((f"config_{ident}_pool_size_valid", isinstance(p, int) and not isinstance(p, bool) and p >= 1,
                    f"{n}.pool_size = {p!r}"))
    return res


def _entry_tests(plan: dict, text: str | None) -> list[tuple[str, bool, str]]:
    entry_path, want_port = plan["entry_path"], plan["want_port"]
    m = plan["port_def"].search(text if text is not None else "")
    got = m.group(1) if m else None
    return [("entrypoint_port_matches_service", got == str(want_port),
             f"{entry_path}: default port {got!r}, Service targets {want_port}" if text is not None
             else f"{entry_path} is missing")]


def _handler_tests(plan: dict, htext: str) -> list[tuple[str, bool, str]]:
    hpath = plan["hpath"]
    res = []
    for test_name, name, pat in plan["handlers"]:
        ok = pat.search(htext) is not None
        res.append((test_name, ok, f"{hpath}: handler {name} " + ("defined" if ok else "not defined")))
    return res


def _test_file_tests(plan: dict, ttext: str | None) -> list[tuple[str, bool, str]]:
    return [("unit_test_file_present", ttext is not None and len(ttext.strip()) > 0, plan["tpath"])]


def _infra_tests(app: AppSpec, service: str, tree: dict[str, str], tpl: dict) -> list[tuple[str, bool, str]]:
    """The infra tree's unit tests, all on its config file (`_infra_tests_of` is the definition)."""
    path = config_path(app, service)
    if not isinstance(tree.get(path, ""), str):
        return _infra_tests_of(app, service, tree, tpl)
    return list(_part_tests(app, service, "infra", tree.get(path),
                            lambda t: _infra_tests_of(app, service, {path: t} if t is not None else {}, tpl)))


def _infra_tests_of(app: AppSpec, service: str, tree: dict[str, str], tpl: dict) -> list[tuple[str, bool, str]]:
    svc = app.service(service)
    base = _values(app, svc)
    res: list[tuple[str, bool, str]] = []
    path = config_path(app, service)
    text = tree.get(path)
    res.append(("config_present", text is not None, path))
    text = text or ""
    m = re.search(tpl["port_def"], text, re.M)
    got = m.group(1) if m else None
    want = _port(svc)
    res.append(("config_port_matches_service", got == str(want), f"{path}: port {got!r}, Service targets {want}"))
    for chk in tpl.get("checks", []):
        mm = re.search(chk["regex"], text, re.M)
        val = mm.group(1) if mm else None
        ok = val is not None and re.fullmatch(r"\d+(\.\d+)?", val) is not None and float(val) > 0
        res.append((chk["name"], ok, f"{path}: {chk['name']} value {val!r}"))
    for c in client_settings(app, service):
        pat = _fill(tpl["upstream_def"], {**base, "callee_ident": re.escape(_snake(c["name"])),
                                          "callee": re.escape(c["name"])})
        ok = re.search(pat, text, re.M) is not None
        res.append((f"upstream_{_snake(c['name'])}_defined", ok, f"{path}: upstream for {c['name']}"))
    return res


def unit_tests(app: AppSpec, service: str, tree: dict[str, str]) -> list[tuple[str, bool, str]]:
    """Evaluate the service's unit tests on ``tree``: a list of (test name, passed, message). Never raises
    for a bad tree (a missing or unparsable file is a failed test)."""
    svc = app.service(service)
    tpl = _template_for(svc)
    if tpl.get("kind") == "infra":
        return _infra_tests(app, service, tree, tpl)
    return _code_tests(app, service, tree, tpl)


# ---------------------------------------------------------------------------------------------
# lint
_LINE_COMMENTS = {
    ".go": ("//",), ".java": ("//",), ".kt": ("//",), ".kts": ("//",), ".cs": ("//",), ".js": ("//",),
    ".ts": ("//",), ".cpp": ("//",), ".h": ("//",), ".hpp": ("//",), ".rs": ("//",), ".gradle": ("//",),
    ".php": ("//", "#"), ".rb": ("#",), ".conf": ("#",), ".sh": ("#",), ".properties": ("#",), ".cnf": ("#",),
    ".txt": ("#",), ".ex": ("#",), ".exs": ("#",), ".mod": ("//",), ".sql": ("--",), ".lua": ("--",),
}
_BLOCK_COMMENT_EXT = {".go", ".java", ".kt", ".kts", ".cs", ".js", ".ts", ".cpp", ".h", ".hpp", ".rs", ".php",
                      ".gradle", ".sql"}
_NO_SINGLE_QUOTE = {".rs", ".txt", ".mod", ".properties", ".cnf", ".conf", ".sh", ".ex", ".exs"}
_PAIRS = {")": "(", "]": "[", "}": "{"}


@lru_cache(maxsize=None)
def _balance_scanner(ext: str) -> tuple[re.Pattern, frozenset, tuple, dict]:
    """(token pattern, quote characters, line-comment prefixes, per-quote string-body stop pattern) for ``ext``.
    Tokens in the order `_balance` tries them at one position: line comment, block comment, quote, bracket."""
    line_c = _LINE_COMMENTS.get(ext, ())
    quotes = {'"'} if ext in _NO_SINGLE_QUOTE else {'"', "'"}
    if ext in {".go", ".js", ".ts"}:
        quotes = quotes | {"`"}
    alts = [re.escape(c) for c in line_c]
    if ext in _BLOCK_COMMENT_EXT:
        alts.append(re.escape("/*"))
    alts.append("[" + "".join(re.escape(q) for q in sorted(quotes)) + re.escape("()[]{}") + "]")
    stops = {q: re.compile("[" + re.escape(q) + re.escape("\\") + ("" if q == "`" else "\n") + "]") for q in quotes}
    return re.compile("|".join(alts)), frozenset(quotes), line_c, stops


@lru_cache(maxsize=None)
def _balance_stripper(ext: str) -> re.Pattern:
    """A pattern matching, at a position where `_balance_scan` finds a comment or a quote, the whole comment or
    the whole string literal that the scanner skips there: line comments up to (not including) their newline,
    terminated block comments, terminated string literals with their escapes. An unterminated block comment or
    literal is not matched, so its opening characters stay in the text (`_balance` then asks the scanner)."""
    _, quotes, line_c, _ = _balance_scanner(ext)   # the scanner's quotes and line-comment prefixes
    alts = [re.escape(c) + r"[^\n]*" for c in line_c]
    if ext in _BLOCK_COMMENT_EXT:
        alts.append(r"/\*[\s\S]*?\*/")
    for q in sorted(quotes):
        body = "[^" + re.escape(q) + r"\\" + ("" if q == "`" else r"\n") + "]"
        alts.append(re.escape(q) + body + r"*(?:\\[\s\S]" + body + "*)*" + re.escape(q))
    return re.compile("|".join(alts))


_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")


def _balance(text: str, ext: str) -> str | None:
    """The first bracket, quote or comment error of ``text`` (``"line N: ..."``) or None: `_balance_scan`'s
    verdict. A well-formed text is recognised without the token-by-token loop: comments and literals are cut
    out (the scanner's own tokens, in its order, by `_balance_stripper`), and when no quote or block-comment
    start is left, the remaining brackets are balanced exactly when deleting adjacent pairs ``()[]{}``
    empties them. Anything else (an error, deep nesting, Python's triple quotes) is the scanner's to report.

    >>> _balance('f(a, "(", /* ] */ [1]) // {', ".java") is None
    True
    >>> _balance('f(a, "(", /* ] */ [1]}', ".java")
    "line 1: unmatched '}'"
    """
    if ext != ".py":
        _, quotes, _, _ = _balance_scanner(ext)
        rest = _balance_stripper(ext).sub(" ", text)
        if not any(q in rest for q in quotes) and not (ext in _BLOCK_COMMENT_EXT and "/*" in rest):
            brackets = _NOT_BRACKET.sub("", rest)
            for _ in range(64):
                if not brackets:
                    return None
                shorter = brackets.replace("()", "").replace("[]", "").replace("{}", "")
                if len(shorter) == len(brackets):
                    break                       # unbalanced: the scanner says where
                brackets = shorter
    return _balance_scan(text, ext)


def _balance_scan(text: str, ext: str) -> str | None:
    """The first bracket, quote or comment error of ``text`` (``"line N: ..."``) or None. Scans from token to
    token (comment starts, quotes, brackets); the line of a position is one plus the newlines before it."""
    pat, quotes, line_c, stops = _balance_scanner(ext)
    stack: list[tuple[str, int]] = []
    i, line, counted = 0, 1, 0
    while True:
        m = pat.search(text, i)
        if m is None:
            break
        i = m.start()
        tok = m.group()
        line += text.count("\n", counted, i)
        counted = i
        if tok in line_c:
            j = text.find("\n", i)
            if j < 0:
                break
            i = j
        elif tok == "/*":
            j = text.find("*/", i + 2)
            if j < 0:
                return f"line {line}: unterminated block comment"
            i = j + 2
        elif tok in quotes:
            if ext == ".py" and text.startswith(tok * 3, i):
                j = text.find(tok * 3, i + 3)
                if j < 0:
                    return f"line {line}: unterminated triple-quoted string"
                i = j + 3
                continue
            stop = stops[tok]
            j = i + 1
            while True:
                mm = stop.search(text, j)
                if mm is None:
                    return f"line {line}: unterminated string literal"
                j = mm.start()
                c = text[j]
                if c == tok:
                    break
                if c == "\\":
                    j += 2
                    continue
                return f"line {line}: unterminated string literal"   # a newline inside the literal
            i = j + 1
        elif tok in "([{":
            stack.append((tok, line))
            i += 1
        else:
            if not stack or stack[-1][0] != _PAIRS[tok]:
                return f"line {line}: unmatched {tok!r}"
            stack.pop()
            i += 1
    if stack:
        return f"line {stack[-1][1]}: unclosed {stack[-1][0]!r}"
    return None


def lint(app: AppSpec, service: str, tree: dict[str, str]) -> list[str]:
    """Structural errors in ``tree`` as ``"path: message"`` strings; empty when every file is well formed.
    Python is parsed with `ast`, JSON/YAML/TOML/XML with their parsers, everything else is checked for
    balanced brackets, quotes and comments."""
    app.service(service)  # unknown service -> KeyError, like the other entry points
    errors: list[str] = []
    for path in sorted(tree):
        text = tree[path]
        if not isinstance(text, str):
            errors.append(f"{path}: not a text file")
            continue
        msg = _lint_file(path, text)
        if msg is not None:
            errors.append(msg)
    return errors


def _lint_yaml(text: str) -> None:
    """Raise what ``yaml_load(text, all_documents=True)`` raises, else return. A text that loads as one document
    (`_parse_config`, cached: the config's unit tests then find it parsed) is a valid stream: the single loader
    has parsed it to its end. Any other text is loaded as all its documents, whose error is the lint's."""
    try:
        _parse_config(text, "yaml")
        return
    except Exception:   # noqa: BLE001 - no verdict yet: the multi-document load decides
        pass
    yaml_load(text, all_documents=True)


#: the text of a trailing comment line after its prefix and space: printable ASCII (no tab, no control character)
_COMMENT_TEXT = re.compile(r"[ -~]*")


def _comment_tail(text: str, prefixes: tuple[str, ...]) -> int:
    """Where the run of comment lines that ends ``text`` starts, or -1 where its last line is not one (or the
    text does not end in a newline). A comment line starts at a line start with one of ``prefixes``, then a
    space and printable ASCII up to its newline (how `faults.noise.benign_change` edits a file).

    >>> _comment_tail("a: 1\\n# one\\n# two\\n", ("#",)), _comment_tail("a: 1 # x\\n", ("#",))
    (5, -1)
    >>> _comment_tail("x\\n// y\\n", ("//",)), _comment_tail("# z\\n", ("#",)), _comment_tail("# z", ("#",))
    (2, 0, -1)
    """
    if not prefixes or not text.endswith("\n"):
        return -1
    start = -1
    end = len(text) - 1          # the newline that ends the line looked at
    while True:
        ls = text.rfind("\n", 0, end) + 1
        for p in prefixes:
            k = ls + len(p)
            if text.startswith(p, ls) and text.startswith(" ", k) and _COMMENT_TEXT.fullmatch(text, k + 1, end):
                break
        else:
            return start
        start = ls
        if ls == 0:
            return 0
        end = ls - 1


def _tail_prefixes(ext: str) -> tuple[str, ...]:
    """The prefixes of the comment lines `_lint_file` may cut off a file of extension ``ext`` (see there)."""
    if ext in (".py", ".yaml", ".yml", ".toml"):
        return ("#",)
    if ext in (".json", ".xml", ".csproj"):
        return ()
    return _LINE_COMMENTS.get(ext, ())


@lru_cache(maxsize=4096)
def _lint_file(path: str, text: str) -> str | None:
    """One file's lint error (``"path: message"``) or None; a pure function of path and content, cached
    (a build re-lints a whole tree of which usually one file changed).

    A text that ends in comment lines (`_comment_tail`, with the prefixes the file's linter reads as a comment to
    the end of the line: ``#`` for Python, YAML and TOML, the bracket check's line comments otherwise) passes
    where the text before them passes: after a complete, well-formed text such a line is a comment for every
    linter here (Python: from the third line on, so that it is never an encoding declaration). A text before
    them that does not pass gives no verdict: the whole text is linted then, for its own message.
    (tests/apps/test_sources_comment_tail.py holds this to the full lint on every file of the apps' trees and
    catalogue changes with random comment tails, and on hand-picked texts.)

    >>> _lint_file("a.py", "x = 1\\ny = 2\\n# docs: note\\n"), _lint_file("a.py", "x = (\\n# docs: note\\n")
    (None, "a.py: line 1: '(' was never closed")
    """
    ext = Path(path).suffix.lower()
    name = Path(path).name
    i = _comment_tail(text, _tail_prefixes(ext if ext else "." + name.lower()))
    if i >= 0 and (ext != ".py" or text.count("\n", 0, i) >= 2) and _lint_file(path, text[:i]) is None:
        return None
    return _lint_text(path, text)


def _lint_text(path: str, text: str) -> str | None:
    """The definition of `_lint_file`: the file's text parsed or bracket-checked in its language."""
    ext = Path(path).suffix.lower()
    name = Path(path).name
    try:
        if ext == ".py":
            ast.parse(text, filename=path)
        elif ext == ".json":
            json.loads(text)
        elif ext in {".yaml", ".yml"}:
            _lint_yaml(text)
        elif ext == ".toml":
            tomllib.loads(text)
        elif ext in {".xml", ".csproj"}:
            ET.fromstring(text)
        else:
            msg = _balance(text, ext if ext else ("." + name.lower()))
            if msg:
                return f"{path}: {msg}"
    except SyntaxError as exc:
        return f"{path}: line {exc.lineno}: {exc.msg}"
    except Exception as exc:  # noqa: BLE001 - every parser error is a lint error
        return f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None

__all__ = ["INFRA_LANGUAGES", "client_settings", "config_path", "initial_history", "initial_tree", "lint",
           "operations", "unit_tests"]
