"""Speed anchors: workloads served under speculative configs, timed with `vllm bench serve`, recorded.

`plan` decides which servers to start and which (workload, config, concurrency) points still need
measuring; `bench` is the `vllm bench serve` invocation and its saved JSON; `metrics` reads the server's
speculative-decoding counters from `/metrics`; `summary` turns repeats into medians and spreads;
`runner` carries a plan out (on servers it starts, or on a gate server it is handed) and writes
ledger records; `verdict` picks the best config per workload and gates draft artifacts; `best_record`
records each pick as a `speed-best` ledger record; `drafts` is a draft artifact's own release job (its
target with and without it, on the workloads that name it) and the merge job's judgement of its gates.
"""
