"""PromQL engine over the twin's metric store, the alert rule pack and alert state.

>>> from sremarathon_env.alerts import PromQLEngine, QueryError, Limits
>>> QueryError("bad_data", "x").kind
'bad_data'
"""

from .engine import PromQLEngine
from .limits import Limits, QueryError

__all__ = ["PromQLEngine", "QueryError", "Limits"]
