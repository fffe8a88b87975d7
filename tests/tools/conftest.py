"""Shared fixtures for the tool tests."""

from __future__ import annotations

import pytest
from tool_doubles import ALERTS, OB, History, Recorder

from sremarathon_env.tools import ToolContext, ToolRuntime


@pytest.fixture
def rec():
    return Recorder()


@pytest.fixture
def rt(rec):
    return ToolRuntime(ToolContext(backend=rec, app=OB, alerts=History(ALERTS), now=360.0))


@pytest.fixture
def fuzz_runtime():
    return ToolRuntime(ToolContext(backend=Recorder(), app=OB, alerts=History(ALERTS), now=0.0))
