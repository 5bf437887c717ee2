"""Where the service catalog's commands were (``commands.keystone.catalog``); kept for the tests that
import them from here."""

from commands.keystone.catalog import SEEDED_SERVICES, CreateEndpoint, CreateRegion, CreateService

__all__ = ["SEEDED_SERVICES", "CreateEndpoint", "CreateRegion", "CreateService"]
