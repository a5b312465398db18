"""Benchmarks: retrieval quality on public data, speed at scale, the peers side by side. Run as ``python -m bench.X``."""
