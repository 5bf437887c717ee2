"""projections/ remembers: the read models in PostgreSQL, built from the log exactly once, in batches.

- ``schema``: the tables of one read-model generation (schema ``stratus_rm``) and the lock that
  serialises every writer of it.
- ``readmodels``: the dispatch, one table (``RULES``) from event class to what the event does to the
  read models; ``apply`` and ``migrations`` hold its pure row functions, and ``identity``, ``images``,
  ``keypairs``, ``operations`` and ``metadefs`` each a table (``APPLY``) from event class to the SQL
  statements of the tables written without reading (``statements``).
- ``view``: the rows and statements of the batch being applied (``ReadModelView``).
- ``projector``: the follower, applying each batch and advancing the tracking position in one
  transaction, bisecting a failing batch and quarantining the event that fails it.
- ``runner``: the projector process; ``rebuild``: replay into a new schema and swap it in.
- ``queries`` (and ``*_queries``): what the API reads, and read-your-writes (``wait_for_position``).
- ``notifications`` and ``instance_actions``: Nova's notifications and instance actions, folded from
  the log's instance events (each a table from event to what it announces or records).
"""
