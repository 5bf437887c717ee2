"""Commands on flavors (Nova's flavors, extra specs and flavor access)."""
