"""PromQL engine over the twin's metric store, the frozen alert rule pack and alert state.

>>> from sremarathon_env.alerts import load_rule_pack
>>> pack = load_rule_pack()
>>> pack.version
'1.3.0'
"""

from .engine import PromQLEngine
from .limits import Limits, QueryError
from .rulepack import Rule, RulePack, load_rule_pack
from .state import AlertEngine, AlertTransition, fingerprint

__all__ = ["PromQLEngine", "QueryError", "Limits", "Rule", "RulePack", "load_rule_pack", "AlertEngine",
           "AlertTransition", "fingerprint"]
