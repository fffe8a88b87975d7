"""The ReAct loop end to end against a scripted chat-completions server on loopback."""

import json

import pytest
from react_chat_server import ScriptedChat, completion, tool_call

from baselines.react import ReActPolicy
from baselines.runner import run_marathon
from sremarathon_env.bundle import read_bundle

SHORT = {"injection_s": 600, "observation_s": 240}


def _invocations(path):
    return [r.data for r in read_bundle(path).records if r.kind == "invocation"]


def _usage(path):
    return [r.data for r in read_bundle(path).records if r.kind == "usage"]


def test_tool_calls_run_and_usage_is_recorded(tmp_path):
    def script(body, n):
        # one read per invocation, then stop; conversation restarts each invocation
        if body["messages"][-1]["role"] == "user":
            return 200, completion(tool_calls=[tool_call("get_alerts", {"state": "firing"}),
                                                tool_call("write_workspace", {"path": "notes.md", "content": "x",
                                                                              "mode": "append"}, cid="c2")])
        return 200, completion(content="done")

    with ScriptedChat(script) as srv:
        pol = ReActPolicy(base_url=srv.base_url, model="scripted", api_key="sekret", price_in=1.0, price_out=2.0)
        rep, path = run_marathon("online-boutique", 0, pol, out_dir=tmp_path, **SHORT)
    invs = _invocations(path)
    assert len(invs) == 7
    assert all([c["tool"] for c in inv["calls"]] == ["get_alerts", "write_workspace"] for inv in invs)
    assert all(c["ok"] for inv in invs for c in inv["calls"])
    assert rep.usage.model_calls == 14 and rep.usage.prompt_tokens == 1400 and rep.usage.completion_tokens == 280
    assert abs(rep.usage.cost_usd - (1400 * 1.0 + 280 * 2.0) / 1e6) < 1e-12
    assert all(u["model"] == "scripted" for u in _usage(path))
    first = srv.requests[0]
    assert first["model"] == "scripted" and {t["function"]["name"] for t in first["tools"]} >= {"report_incident",
                                                                                               "rollback"}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]      # fresh conversation each time
    assert [m["role"] for m in srv.requests[2]["messages"]] == ["system", "user"]
    second = srv.requests[1]["messages"]
    assert second[-1]["role"] == "tool" and second[-2]["role"] == "tool" and second[-3]["tool_calls"]
    assert json.loads(second[-2]["content"])["ok"] is True
    assert srv.auth[0] == "Bearer sekret"
    # the workspace persists across invocations and the model sees it
    assert "notes.md" in srv.requests[-2]["messages"][1]["content"]


def test_malformed_output_and_tool_errors_do_not_break_the_run(tmp_path):
    def script(body, n):
        k = n % 5
        if k == 0:
            return 200, completion(tool_calls=[tool_call("get_logs", "{not json"),           # bad JSON args
                                                tool_call("no_such_tool", {}, cid="c2"),         # unknown tool
                                                tool_call("restart", {"service": "cartservice"}, cid="c3"),  # uncited
                                                tool_call("get_logs", {"service": "nope"}, cid="c4")])  # not found
        if k == 1:
            return 200, "this is not json"
        if k == 2:
            return 200, {"choices": []}
        if k == 3:
            return 500, {"error": "overloaded"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": "garbage"}}]}

    with ScriptedChat(script) as srv:
        rep, path = run_marathon("online-boutique", 0, ReActPolicy(base_url=srv.base_url, model="m"),
                                 out_dir=tmp_path, **SHORT)
    assert rep.complete and rep.n_invocations == 7
    invs = _invocations(path)
    errs = {inv["error"] for inv in invs if inv["error"]}
    assert any("non-JSON" in e for e in errs) or any("malformed" in e for e in errs) or any("HTTP 500" in e for e in errs)
    bad = [c for inv in invs for c in inv["calls"]]
    types = {c["error"].split(":")[0] for c in bad if c["error"]}
    assert {"validation_error", "unknown_tool", "policy_refused", "not_found"} <= types
    assert rep.n_actions >= 1 and rep.marathon_score == 0.0


def test_step_and_token_budgets(tmp_path):
    def script(body, n):
        return 200, completion(tool_calls=[tool_call("list_workspace", {})], prompt_tokens=50, completion_tokens=5)

    with ScriptedChat(script) as srv:
        rep, path = run_marathon("online-boutique", 0, ReActPolicy(base_url=srv.base_url, model="m", max_steps=10),
                                 out_dir=tmp_path, **SHORT)
    assert [u["model_calls"] for u in _usage(path)] == [10] * 7        # at most 10 model steps per invocation
    with ScriptedChat(script) as srv:
        rep, path = run_marathon("online-boutique", 0,
                                 ReActPolicy(base_url=srv.base_url, model="m", token_budget=120),
                                 out_dir=tmp_path / "b", **SHORT)
    usage = _usage(path)
    assert [u["model_calls"] for u in usage] == [3] * 7                 # 55 tokens per call: stops past 120
    assert all(r["max_tokens"] <= 120 for r in srv.requests)


def test_tool_budget_exhaustion_ends_the_invocation(tmp_path):
    def script(body, n):
        return 200, completion(tool_calls=[tool_call("get_traces", {}, cid=f"c{i}") for i in range(25)])

    with ScriptedChat(script) as srv:
        rep, path = run_marathon("online-boutique", 0, ReActPolicy(base_url=srv.base_url, model="m"),
                                 out_dir=tmp_path, **SHORT)
    usage = _usage(path)
    assert all(u["model_calls"] == 1 for u in usage)
    inv = _invocations(path)[0]
    assert any((c["error"] or "").startswith("budget_exhausted") for c in inv["calls"])
    assert inv["budget_used_s"] <= 110.0


def test_unreachable_endpoint_is_an_invocation_error(tmp_path):
    pol = ReActPolicy(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2)
    rep, path = run_marathon("online-boutique", 0, pol, out_dir=tmp_path, **SHORT)
    invs = _invocations(path)
    assert all("unreachable" in (i["error"] or "") for i in invs)


def test_options_from_environment(monkeypatch):
    monkeypatch.setenv("SREMARATHON_LLM_BASE_URL", "http://127.0.0.1:1/v1/")
    monkeypatch.setenv("SREMARATHON_LLM_MODEL", "env-model")
    p = ReActPolicy()
    assert p.base_url == "http://127.0.0.1:1/v1" and p.model == "env-model"
    monkeypatch.delenv("SREMARATHON_LLM_MODEL")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ValueError, match="model"):
        ReActPolicy()
