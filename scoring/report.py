"""`ScoreReport`: what the scorer computes from a bundle, with JSON and table renderings.

>>> r = ScoreReport(marathon_score=50.0, n_faults=2, stages_total=3, credit_mean=0.5,
...                 stage_shares=StageShares(correlated=1.0, localised=0.5, repaired=0.0))
>>> r.outcomes_count()["missed"]
0
>>> "Marathon-Score" in r.to_text()
True
"""

from __future__ import annotations

import io
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["handled", "repaired_without_handling", "acted_without_repair", "located_without_action",
                  "correlated_only", "missed"]
OUTCOMES: tuple[str, ...] = ("handled", "repaired_without_handling", "acted_without_repair",
                             "located_without_action", "correlated_only", "missed")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FaultScore(_M):
    instance_id: str
    fault_id: str
    category: str
    start_s: float
    end_s: float
    correlated_t: float | None = None
    localised_t: float | None = None
    repaired_t: float | None = Field(None, description="time the repair hold completed")
    stages: int = 0
    credit: float = 0.0
    outcome: Outcome = "missed"


class StageShares(_M):
    correlated: float = 0.0
    localised: float = 0.0
    repaired: float = 0.0


class Degradation(_M):
    agent: float | None = Field(None, description="bad requests / all requests (traffic-weighted)")
    reference: float | None = Field(None, description="the same for the matched no-action run")
    ratio: float | None = Field(None, description="agent / reference; 1.0 = as bad as doing nothing")
    ticks: int = 0


class Usage(_M):
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class ScoreReport(_M):
    marathon_score: float
    n_faults: int
    stages_total: int = Field(description="sum of stages reached over all faults")
    credit_mean: float
    stage_shares: StageShares
    n_forbidden: int = 0
    penalty: float = 0.0
    n_actions: int = 0
    n_risky_actions: int = 0
    intervention_risk: float | None = None
    degradation: Degradation = Field(default_factory=Degradation)
    mttd_s: float | None = None
    mttl_s: float | None = None
    mttr_s: float | None = None
    usage: Usage = Field(default_factory=Usage)
    outcomes: dict[str, int] = Field(default_factory=dict)
    faults: list[FaultScore] = Field(default_factory=list)
    n_invocations: int = 0
    final_t: float = 0.0
    complete: bool = False
    digest: str | None = None

    def outcomes_count(self) -> dict[str, int]:
        out = {o: 0 for o in OUTCOMES}
        for f in self.faults:
            out[f.outcome] += 1
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    def render(self, console=None, faults: bool = True) -> None:
        """Print the report as rich tables."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        t = Table(title="SRE-Marathon score", show_header=False)
        t.add_column("metric")
        t.add_column("value", justify="right")

        def f(x, fmt="{:.2f}", unit=""):
            return "-" if x is None else fmt.format(x) + unit

        t.add_row("Marathon-Score", f(self.marathon_score))
        t.add_row("faults / stages reached", f"{self.n_faults} / {self.stages_total}")
        s = self.stage_shares
        t.add_row("correlated / localised / repaired", f"{s.correlated:.1%} / {s.localised:.1%} / {s.repaired:.1%}")
        t.add_row("forbidden attempts (penalty)", f"{self.n_forbidden} ({self.penalty:.2f})")
        t.add_row("intervention risk", f(self.intervention_risk, "{:.1%}") + f"  of {self.n_actions} actions")
        d = self.degradation
        t.add_row("degradation agent / no-action / ratio",
                  f"{f(d.agent, '{:.4f}')} / {f(d.reference, '{:.4f}')} / {f(d.ratio, '{:.3f}')}")
        t.add_row("MTTD / MTTL / MTTR", f"{f(self.mttd_s, '{:.0f}', ' s')} / {f(self.mttl_s, '{:.0f}', ' s')} / "
                  f"{f(self.mttr_s, '{:.0f}', ' s')}")
        u = self.usage
        t.add_row("model calls / tokens / cost",
                  f"{u.model_calls} / {u.prompt_tokens + u.completion_tokens} / ${u.cost_usd:.4f}")
        t.add_row("outcomes", ", ".join(f"{k}={v}" for k, v in self.outcomes.items() if v))
        t.add_row("invocations / final t", f"{self.n_invocations} / {self.final_t:.0f} s")
        t.add_row("complete", "yes" if self.complete else "no (prefix)")
        if self.digest:
            t.add_row("digest", self.digest[:16])
        console.print(t)
        if faults and self.faults:
            ft = Table(title="faults")
            for c in ("instance", "fault", "category", "start", "end", "corr", "loc", "rep", "credit", "outcome"):
                ft.add_column(c)
            for x in self.faults:
                ft.add_row(x.instance_id, x.fault_id, x.category, f"{x.start_s:.0f}", f"{x.end_s:.0f}",
                           f(x.correlated_t, "{:.0f}"), f(x.localised_t, "{:.0f}"), f(x.repaired_t, "{:.0f}"),
                           f"{x.credit:.2f}", x.outcome)
            console.print(ft)

    def to_text(self, faults: bool = True, width: int = 120) -> str:
        from rich.console import Console

        buf = io.StringIO()
        self.render(Console(file=buf, width=width, force_terminal=False, color_system=None), faults=faults)
        return buf.getvalue()
