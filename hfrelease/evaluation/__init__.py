"""Evaluation: quality gates run against served artifacts, recorded in the ledger and judged against the
reference (the verdicts themselves are `hfrelease.verdicts`').
"""
