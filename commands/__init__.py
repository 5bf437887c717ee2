"""commands/ decides: the aggregates, their events, and one handler per use case.

A use case is a command (an imperative, frozen dataclass: ``CreateServer``, ``DeleteFlavor``) and
its handler, a function ``handler(cmd, uow, **dependencies)`` that loads the decision state, calls
one domain method and appends what changed in one atomic append. The layout:

============================  ================================================================
``unit_of_work``              ``UnitOfWork`` (load, save, retry on a lost race, with this
                              process's aggregate cache on a first attempt) and ``@retried``,
                              the one decorator that makes a handler's body the unit retried
``loaders``                   the decision state every subject loads the same way: a server,
                              flavor, host, image, key pair, quota usage, server group
``bus``                       ``HANDLERS`` (command class -> handler), ``MessageBus.handle`` and
                              ``bootstrap``, which each process's composition root calls once
``servers/``                  ``create``, ``delete``, ``scheduling`` (a host chosen, its claim),
                              ``spawn``, ``actions`` (power, rebuild, shelve, locks), ``fields``
                              (name, metadata, tags), ``moves`` (resize, migration),
                              ``groups`` (server groups), ``reconcile`` (what a host found),
                              ``releases`` (what a deleted or failed server gives back)
``flavors/``                  ``create`` (and delete), ``change`` (extra specs, access)
``hosts/``                    ``register``, ``services`` (os-services), ``aggregates``
``quotas/``                   ``limits`` (a project's and a quota class's)
``images/``                   ``create`` (and upload, delete), ``update`` (patch, members),
                              ``tasks`` (Glance's tasks)
``keypairs/``                 ``manage`` (create, delete), ``keys`` (generating a key pair)
``metadefs/``                 ``namespaces`` (Glance's metadata definitions)
``keystone/``                 Keystone: ``projects``, ``users``, ``domains``, ``groups``, ``roles``,
                              ``assignments``, ``catalog`` (the service catalog),
                              ``application_credentials``, ``tokens``, ``bootstrap``
``providers/``                OpenStack Placement: ``manage`` (providers), ``inventories``
                              (and traits, aggregates), ``custom`` (resource classes, traits),
                              ``allocations``
============================  ================================================================

The aggregates keep their modules (``instance``, ``host``, ``flavor``, ``image``, ``task``,
``placement``, ``identity``, ``application_credentials``...): their module path is part of every
recorded event's topic. Callers send commands to the bus their composition root built:
``bus.handle(DeleteServer(...))`` (the one-line facades of the methods callers used before the bus
are the tests', in ``tests/fixtures/facades``).
"""
