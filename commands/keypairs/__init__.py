"""Commands on key pairs (Nova's os-keypairs): each counted in its user's ``key_pairs`` ledger."""
