"""The instrumented tool catalogue, its policy layer, incidents and the agent's workspace.

>>> from apps import load_app
>>> from sremarathon_env.tools import ToolRuntime, ToolContext, TOOL_NAMES, tool_schemas
>>> len(TOOL_NAMES), len(tool_schemas("mcp")) == len(TOOL_NAMES)
(27, True)
"""

from sremarathon_env.tools.incidents import Incident, IncidentStore
from sremarathon_env.tools.limits import Limits
from sremarathon_env.tools.policy import affected_services
from sremarathon_env.tools.results import PolicyInfo, ToolError, ToolResult
from sremarathon_env.tools.runtime import ToolContext, ToolRuntime
from sremarathon_env.tools.specs import TOOL_MODELS, TOOL_NAMES, TOOLS, tool_schemas
from sremarathon_env.tools.workspace import Workspace, WorkspaceError

__all__ = ["Incident", "IncidentStore", "Limits", "PolicyInfo", "TOOLS", "TOOL_MODELS", "TOOL_NAMES", "ToolContext",
           "ToolError", "ToolResult", "ToolRuntime", "Workspace", "WorkspaceError", "affected_services",
           "tool_schemas"]
