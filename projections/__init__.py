"""projections/ remembers: the read models in PostgreSQL, built from the log exactly once, in batches.

- ``schema``: the tables of one read-model generation (schema ``stratus_rm``) and the lock that
  serialises every writer of it.
- ``apply``: pure functions from (row, event) to row.
- ``projection``: eventsourcing's ``Projection`` dispatching each domain event to those functions,
  and the batch writer that applies a batch and advances the tracking position in one transaction.
- ``runner``: the projector process; ``rebuild``: replay into a new schema and swap it in.
- ``queries``: what the API reads, and read-your-writes (``wait_for_position``).
"""
