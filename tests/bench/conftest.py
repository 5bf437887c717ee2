"""Keeps pytest out of the benchmarks: they take minutes and report ratios, not pass/fail."""

collect_ignore_glob = ["*.py"]
