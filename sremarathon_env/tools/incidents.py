"""Incidents the agent reports: the scored unit of correlation and localisation.

An incident groups alerts (by fingerprint) under a root-cause hypothesis: culprit services and the
responsible artifact (a free string that the scorer matches through the app's alias table, e.g.
``cartservice: REDIS_ADDR`` or ``checkoutservice/config/clients.yaml``). Ids are ``INC-0001``,
``INC-0002``... in reporting order. Every change bumps ``revision`` and is kept in ``history`` so the
recorder can write each version.

>>> store = IncidentStore()
>>> inc = store.report(title="checkout errors", alert_fingerprints=["a1"], culprit_services=["cartservice"],
...                    artifact="REDIS_ADDR", summary="", now=240.0)
>>> inc.id, inc.status, store.open_ids()
('INC-0001', 'open', ['INC-0001'])
>>> store.update("INC-0001", now=360.0, add_alert_fingerprints=["b2"]).alert_fingerprints
['a1', 'b2']
>>> store.resolve("INC-0001", now=480.0).status, store.open_ids()
('resolved', [])
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Incident(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    alert_fingerprints: list[str]
    culprit_services: list[str]
    artifact: str
    summary: str
    status: Literal["open", "resolved"] = "open"
    opened_at: float
    updated_at: float
    resolved_at: float | None = None
    revision: int = 1


def _dedup(xs: list[str]) -> list[str]:
    out: list[str] = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


class IncidentStore:
    def __init__(self) -> None:
        self._items: dict[str, Incident] = {}
        self.history: list[Incident] = []  # every version, in order of change

    def __len__(self) -> int:
        return len(self._items)

    def _put(self, inc: Incident) -> Incident:
        self._items[inc.id] = inc
        self.history.append(inc)
        return inc

    def get(self, incident_id: str) -> Incident | None:
        return self._items.get(incident_id)

    def all(self) -> list[Incident]:
        return [self._items[k] for k in sorted(self._items)]

    def open_ids(self) -> list[str]:
        return [k for k in sorted(self._items) if self._items[k].status == "open"]

    def report(self, *, title: str, alert_fingerprints: list[str], culprit_services: list[str],
               artifact: str, summary: str, now: float) -> Incident:
        iid = f"INC-{len(self._items) + 1:04d}"
        return self._put(Incident(id=iid, title=title, alert_fingerprints=_dedup(alert_fingerprints),
                                  culprit_services=_dedup(culprit_services), artifact=artifact, summary=summary,
                                  opened_at=now, updated_at=now))

    def update(self, incident_id: str, *, now: float, title: str | None = None,
               alert_fingerprints: list[str] | None = None, add_alert_fingerprints: list[str] = (),
               culprit_services: list[str] | None = None, artifact: str | None = None,
               summary: str | None = None) -> Incident:
        """Replace the given fields (``add_alert_fingerprints`` appends). KeyError for an unknown id,
        ValueError for a resolved incident."""
        inc = self._items[incident_id]
        if inc.status != "open":
            raise ValueError(f"{incident_id} is resolved")
        fps = list(inc.alert_fingerprints if alert_fingerprints is None else alert_fingerprints)
        changes = {"alert_fingerprints": _dedup(fps + list(add_alert_fingerprints)), "updated_at": now,
                   "revision": inc.revision + 1}
        if title is not None:
            changes["title"] = title
        if culprit_services is not None:
            changes["culprit_services"] = _dedup(culprit_services)
        if artifact is not None:
            changes["artifact"] = artifact
        if summary is not None:
            changes["summary"] = summary
        return self._put(inc.model_copy(update=changes))

    def resolve(self, incident_id: str, *, now: float, summary: str | None = None) -> Incident:
        inc = self._items[incident_id]
        if inc.status != "open":
            raise ValueError(f"{incident_id} is already resolved")
        changes = {"status": "resolved", "resolved_at": now, "updated_at": now, "revision": inc.revision + 1}
        if summary is not None:
            changes["summary"] = summary
        return self._put(inc.model_copy(update=changes))

    def snapshot(self) -> list[dict]:
        return [i.model_dump(mode="json") for i in self.all()]
