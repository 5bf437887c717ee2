"""Stratus's shared kernel: configuration, the command context, and the event store on JetStream.

Nothing in this package connects at import time; each process's composition root opens what it needs.
"""
