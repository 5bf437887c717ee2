"""OpenStack Placement's use cases, one module each: a command (a frozen dataclass) and its handler
``handler(cmd, uow)``, registered in ``commands.bus.HANDLERS``.

==========================  ====================================================================
``loaders``                 a provider (a compute host or a ``ResourceProvider``), a consumer,
                            the ``PlacementCatalog`` of custom resource classes and traits
``manage``                  providers that are not compute hosts: create, update, delete
``inventories``             a provider's inventories, traits and aggregates
``custom``                  custom resource classes and traits: create, delete
``allocations``             consumers' allocations, replaced in one atomic append
==========================  ====================================================================

A consumer's allocations across providers are one atomic append (the ``Consumer`` and every
provider it touches), each under its aggregate's optimistic-concurrency check: Placement's
generations, enforced by the log. The aggregates stay in ``commands.placement``,
``commands.provider`` and ``commands.host`` (their module path is part of every event's topic).
"""

#: A lost race, in Placement's words (answered 409 ``placement.concurrent_update``).
CONFLICT = "Another request changed this resource provider at the same time; retry."
