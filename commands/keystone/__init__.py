"""Keystone's use cases, one module each: a command (a frozen dataclass) and its handler
``handler(cmd, uow, **dependencies)``, registered in ``commands.bus.HANDLERS``.

==========================  ====================================================================
``loaders``                 identities loaded by their Keystone ids (404 in Keystone's words), and
                            names unique in a domain, taken and released in their owner's append
``projects``, ``users``     create, update, delete (and a password set, recorded without its hash)
``domains``, ``groups``     create, update, delete (a domain takes its members along); membership
``roles``                   create, update, delete, implied roles
``assignments``             roles granted to users and groups on projects, domains, the system
``catalog``                 the service catalog: regions, services, endpoints, and its seeding
``application_credentials`` a user's credentials for programs, and their access rules
``tokens``                  a token's revocation
``bootstrap``               the first run: the default domain, roles, catalog, an admin
==========================  ====================================================================

The aggregates stay in ``commands.identity``, ``commands.identity_catalog`` and
``commands.application_credentials``: their module path is part of every recorded event's topic.
"""
