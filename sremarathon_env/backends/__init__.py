"""Backends behind one protocol: `sim` (the deterministic digital twin) and `kubernetes` (live)."""

from sremarathon_env.backends.base import Backend, EntryEvidence, OpResult

__all__ = ["Backend", "EntryEvidence", "OpResult"]
