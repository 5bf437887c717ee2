"""The domain's errors: each has a stable code; the API maps them to HTTP in one place."""

from __future__ import annotations


class DomainError(Exception):
    """A command refused by the domain; ``code`` is its stable error code."""

    code = "stratus.error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    """What the command names does not exist (or the caller may not see it)."""

    code = "stratus.not_found"


class InvalidInput(DomainError):
    """The command itself is wrong (Nova: 400)."""

    code = "stratus.invalid_input"


class Conflict(DomainError):
    """The command lost a race with another one on the same aggregate; retrying may succeed."""

    code = "stratus.concurrent_update"


class InvalidState(DomainError):
    """The command is illegal in the aggregate's current state (Nova: InstanceInvalidState)."""

    code = "compute.instance_invalid_state"


class AlreadyExists(DomainError):
    """What the command would create exists already (Nova: 409)."""

    code = "stratus.already_exists"


class NoValidHost(DomainError):
    """No host can take the server (the scheduler's verdict)."""

    code = "compute.no_valid_host"


class InsufficientResources(DomainError):
    """The chosen host has no room for the claim (the scheduler tries the next)."""

    code = "compute.insufficient_resources"


class QuotaExceeded(DomainError):
    """A per-resource limit would be exceeded (Nova answers 403 for metadata items, 413 for quotas)."""

    code = "compute.quota_exceeded"


class NoMoreFixedIps(DomainError):
    """The fixed network has no free address left."""

    code = "network.no_more_fixed_ips"


class ConflictingState(DomainError):
    """The request contradicts the resource's state (Nova answers 409), e.g. access to a public flavor."""

    code = "stratus.conflicting_state"


class GroupPolicyViolated(InsufficientResources):
    """Placing the instance on this host would break its server group's hard (anti-)affinity."""

    code = "compute.group_policy_violated"


class Forbidden(DomainError):
    """The actor may see the resource but not change it (Glance: another project's public image)."""

    code = "stratus.forbidden"


class InstanceLocked(ConflictingState):
    """The server is locked and the actor is not an admin (Nova: InstanceIsLocked, 409)."""

    code = "compute.instance_locked"
