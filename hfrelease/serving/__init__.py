"""Serving: build the exact `vllm serve` command for an artifact, run it, and watch it."""
