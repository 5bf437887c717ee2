"""Commands on servers: creating and deleting them, scheduling them onto a host, spawning them there,
their power actions, moves, fields, and what a host finds of them (reconciliation)."""
