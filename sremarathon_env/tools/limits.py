"""Size and budget limits of the tool layer, in one place (all configurable per run).

>>> Limits().budget_s, Limits().workspace_file_bytes
(110.0, 65536)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    budget_s: float = 110.0               #: budget seconds per invocation
    invalid_call_cost_s: float = 1.0      #: cost of a malformed, unknown, refused or forbidden call
    result_chars: int = 24_000            #: cap on a result's compact JSON size (characters)
    raw_args_chars: int = 1_000           #: preview length of arguments that did not validate
    max_args_chars: int = 512 * 1024      #: arguments (as JSON text) larger than this are refused unparsed
    workspace_file_bytes: int = 64 * 1024
    workspace_total_bytes: int = 512 * 1024
    workspace_files: int = 200
