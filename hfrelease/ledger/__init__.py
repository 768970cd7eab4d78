"""The ledger: every measured result, with its provenance, as one content-addressed JSON file.

`record` is the record type and its `input_key`, `store` reads, writes and merges a family's
`results/` directory, and `provenance` collects versions, hardware and time; records name artifacts by
their content hashes (`hfrelease.files.hashing`). Cards render only from these records.
"""
