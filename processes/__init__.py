"""The entry points: the ``stratus`` command, each process's composition root, and what runs them.

The top layer (docs/architecture.md): it reads ``Settings``, opens the bridges and pools, builds the
objects of the layers below and hands them to their loops. ``cli`` parses the command line and calls
one module per process (``api``, ``projector``, ``scheduler`` ...); ``devrun`` is ``stratus run``,
the whole control plane under the ``supervisor``; ``conformance`` runs tempest against a stack of
its own. Nothing below this package imports it.
"""
