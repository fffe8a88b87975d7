"""The build pipeline: unified diffs applied to a service's source, lint, unit tests.

>>> from sremarathon_env.pipeline import BuildPipeline, apply_diff, PatchError
>>> apply_diff({"a.txt": "x\\n"}, "--- a/a.txt\\n+++ b/a.txt\\n@@ -1 +1 @@\\n-x\\n+y\\n")
{'a.txt': 'y\\n'}
"""

from sremarathon_env.pipeline.build import MAX_DIFF_CHARS, BuildPipeline, BuildResult, make_diff
from sremarathon_env.pipeline.diff import PatchError, apply_diff, changed_paths, parse_diff, safe_relpath

__all__ = ["BuildPipeline", "BuildResult", "MAX_DIFF_CHARS", "PatchError", "apply_diff", "changed_paths",
           "make_diff", "parse_diff", "safe_relpath"]
