"""Nova beside Stratus: the setup script and the no-auth stub (see docs/performance.md)."""
