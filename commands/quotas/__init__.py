"""Commands on quotas: a project's limits (Nova's os-quota-sets) and quota classes."""
