"""Telemetry: the metric store the twin writes and the catalogue of series it exports."""

from sremarathon_env.telemetry.catalogue import CATALOGUE, LATENCY_BUCKETS_MS, MetricDef
from sremarathon_env.telemetry.store import Family, MetricStore

__all__ = ["CATALOGUE", "LATENCY_BUCKETS_MS", "MetricDef", "Family", "MetricStore"]
