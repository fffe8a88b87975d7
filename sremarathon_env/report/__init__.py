"""Reports over bundles: the leaderboard (terminal, Markdown, CSV), PNG plots and a static HTML view.

>>> from sremarathon_env.report import leaderboard_rows
>>> leaderboard_rows([])
[]
"""

from .collect import RunResult, collect_runs, run_result
from .leaderboard import LEADERBOARD_COLUMNS, leaderboard_csv, leaderboard_markdown, leaderboard_rows, \
    leaderboard_table, per_app_rows, write_leaderboard

__all__ = ["RunResult", "collect_runs", "run_result", "LEADERBOARD_COLUMNS", "leaderboard_rows", "per_app_rows",
           "leaderboard_csv", "leaderboard_markdown", "leaderboard_table", "write_leaderboard"]
