"""The ledger: every measured result, with its provenance, as one content-addressed JSON file.

`hashing` computes artifact content hashes (each weight byte read at most once), `record` is the
record type and its `input_key`, `store` reads, writes and merges a family's `results/` directory,
and `provenance` collects versions, hardware and time. Cards render only from these records.
"""
