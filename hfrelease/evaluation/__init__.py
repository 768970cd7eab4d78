"""Evaluation: quality gates and speed workloads run against served artifacts, and how results are compared."""
