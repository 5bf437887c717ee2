"""ProjectQuota: a project's limits (os-quota-sets), and the check a create makes against them.

Limits are events on the project's own quota aggregate; a project nobody set limits for has Nova's
defaults. The check is made when a command is decided, against the usage the caller derived from
the read model: it stops a project that is over its quota, but two creates racing for the last
unit can both pass (the race-free accounting is a later issue's).
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import InvalidInput, QuotaExceeded

_NS = uuid5(NAMESPACE_URL, "urn:stratus:quota")

# Nova's defaults ([quota] options), in the order Nova's quota-set body lists them at 2.1.
DEFAULT_LIMITS: Mapping[str, int] = {
    "instances": 10,
    "cores": 20,
    "ram": 51200,
    "floating_ips": 10,
    "fixed_ips": -1,
    "metadata_items": 128,
    "injected_files": 5,
    "injected_file_content_bytes": 10240,
    "injected_file_path_bytes": 255,
    "key_pairs": 100,
    "security_groups": 10,
    "security_group_rules": 20,
    "server_groups": 10,
    "server_group_members": 10,
}
MAX_LIMIT = 2**31 - 1


def quota_aggregate_id(project_id: str) -> UUID:
    return uuid5(_NS, project_id)


def quota_class_id(name: str) -> UUID:
    return uuid5(_NS, f"class:{name}")


DEFAULT_CLASS = "default"


def _check_limit(resource: str, limit: int, body: str) -> None:
    if resource not in DEFAULT_LIMITS:
        raise InvalidInput(f"Bad key(s) {resource} in {body}")
    if not -1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"Quota limit {limit} for {resource} must be -1 or 0 to {MAX_LIMIT}.")


def check(limits: Mapping[str, int], used: Mapping[str, int], requested: Mapping[str, int]) -> None:
    """Raise ``QuotaExceeded`` (Nova's wording) if adding ``requested`` to ``used`` passes a limit."""
    over = [r for r, n in requested.items() if 0 <= limits[r] < used.get(r, 0) + n]
    if over:
        r = over[0]
        raise QuotaExceeded(
            f"Quota exceeded for {', '.join(sorted(over))}: Requested {requested[r]}, "
            f"but already used {used.get(r, 0)} of {limits[r]} {r}"
        )


class _Overrides:
    """Limits that differ from Nova's built-in defaults (a project's, or a quota class's)."""

    overrides: dict[str, int]

    @property
    def limits(self) -> dict[str, int]:
        return {**DEFAULT_LIMITS, **self.overrides}

    def _changed(self, limits: Mapping[str, int]) -> dict[str, int]:
        return {r: v for r, v in limits.items() if self.limits[r] != v or r not in self.overrides}


class ProjectQuota(_Overrides, Aggregate):
    """The limits an admin set for one project, over its quota class's."""

    @staticmethod
    def create_id(project_id: str) -> UUID:
        return quota_aggregate_id(project_id)

    class Created(Aggregate.Created):
        """A project's quota record was created (its limits start at the defaults)."""

        project_id: str

    @event(Created)
    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        self.overrides: dict[str, int] = {}

    def set_limits(self, limits: Mapping[str, int], used: Mapping[str, int], force: bool = False) -> None:
        """Nova's update: -1 is unlimited; below what is in use only with ``force``."""
        for resource, limit in limits.items():
            _check_limit(resource, limit, "quota_set")
            minimum = used.get(resource, 0)
            if not force and limit != -1 and limit < minimum:
                raise InvalidInput(
                    f"Quota limit {limit} for {resource} must be greater than or equal to already used "
                    f"and reserved {minimum}."
                )
        changed = self._changed(limits)
        if changed:
            self._limits_set(changed)

    class LimitsSet(Aggregate.Event):
        """Some of a project's quota limits were set (-1: unlimited)."""

        limits: dict[str, int]

    @event(LimitsSet)
    def _limits_set(self, limits: dict[str, int]) -> None:
        self.overrides = {**self.overrides, **limits}

    def reset(self) -> None:
        """Back to the defaults (``DELETE /os-quota-sets/{project}``)."""
        if self.overrides:
            self._reset()

    class Reset(Aggregate.Event):
        """A project's quota limits went back to the defaults."""

    @event(Reset)
    def _reset(self) -> None:
        self.overrides = {}

    def check(self, used: Mapping[str, int], requested: Mapping[str, int]) -> None:
        check(self.limits, used, requested)


class QuotaClass(_Overrides, Aggregate):
    """A quota class (``os-quota-class-sets``). As in Nova, only ``default`` means anything: its limits
    replace the built-in defaults (``DEFAULT_LIMITS``) for every project that has not set its own."""

    @staticmethod
    def create_id(name: str) -> UUID:
        return quota_class_id(name)

    class Created(Aggregate.Created):
        """A quota class was created (os-quota-class-sets); its limits follow."""

        name: str

    @event(Created)
    def __init__(self, name: str) -> None:
        self.name = name
        self.overrides: dict[str, int] = {}

    def set_limits(self, limits: Mapping[str, int]) -> None:
        """Nova's quota class update: -1 is unlimited; what is in use does not matter."""
        for resource, limit in limits.items():
            _check_limit(resource, limit, "quota_class_set")
        changed = self._changed(limits)
        if changed:
            self._limits_set(changed)

    class LimitsSet(Aggregate.Event):
        """Limits of a quota class were set (-1: unlimited); the default class's are every project's
        defaults."""

        limits: dict[str, int]

    @event(LimitsSet)
    def _limits_set(self, limits: dict[str, int]) -> None:
        self.overrides = {**self.overrides, **limits}
