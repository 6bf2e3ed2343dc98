"""``voxlane bench``: a load generator and metrics for any OpenAI-compatible speech server, and the raw
engine's ceiling. Entry points in ``cli.py``; figures defined in ``metrics.py`` and docs/benchmarks.md."""
