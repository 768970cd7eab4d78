"""Files, below every package that reads or writes them: written atomically (`atomic`), hashed and the hash
cache (`hashing`), an artifact's files and identity, local or Hub-pinned (`sources`), hfrelease's cache
directory (`cache`), and what a repo may ship: the one allowlist (`allowlist`) over the names and contents
a bundle holds (`rules`), which the cards' links and reproduce commands name too.
"""
