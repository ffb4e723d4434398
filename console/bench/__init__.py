"""Benchmarks: runs, request samples, comparisons; the pure load generator lives in loadgen/."""
