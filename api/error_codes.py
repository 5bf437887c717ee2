"""Every stable error code the API answers with, declared once: its name, HTTP status and meaning.

As Placement keeps ``placement/errors.py``: a client may rely on a code where a message's wording
may change. Nova's, Keystone's and Glance's errors carry the code in the ``X-Stratus-Error-Code``
header (their bodies keep exactly their own keys); Placement's carry it in the body's
``errors[].code``, as Placement does. docs/api.md lists this table for readers; a unit test
(tests/unit/test_error_codes.py) holds the two and the code together.

The domain's errors name their codes themselves (``commands.errors`` and the Placement aggregates'
errors): the domain knows nothing of HTTP, so their entries here refer to those classes and add the
status the API answers with. Everything in ``api/`` names a code through this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from commands import errors as domain
from commands import idempotency
from commands.provider import CannotDeleteParent, DuplicateProvider
from commands.resource_provider import InventoryInUse, ProviderGenerationConflict, ProviderInUse


@dataclass(frozen=True)
class ErrorCode:
    """One stable error code: what clients match on, the status it comes with, and what it means."""

    code: str
    status: int  # ANY_STATUS: the status of whatever failure it stands for (Placement's default code)
    meaning: str


ANY_STATUS = 0
CODES: dict[str, ErrorCode] = {}


def _declare(code: str, status: int, meaning: str) -> ErrorCode:
    if code in CODES:
        raise ValueError(f"error code {code} declared twice")
    CODES[code] = ErrorCode(code, status, meaning)
    return CODES[code]


# -- failures the API itself detects --------------------------------------------------------------
BAD_REQUEST = _declare(
    "api.bad_request",
    400,
    "The request is malformed: its body, a parameter or a header (the message says which).",
)
UNAUTHORIZED = _declare(
    "api.unauthorized", 401, "No valid token: missing, malformed, expired, revoked, or its user disabled."
)
FORBIDDEN = _declare("api.forbidden", 403, "Policy does not allow the caller's roles to do this.")
NOT_FOUND = _declare("api.not_found", 404, "No such resource, or one the caller may not see.")
VERSION_NOT_SUPPORTED = _declare(
    "api.version_not_supported", 406, "The requested microversion is outside the range this API serves."
)
CONFLICT = _declare(
    "api.conflict", 409, "The request contradicts the resource's state (Glance's properties)."
)
GONE = _declare("api.gone", 410, "What went with nova-network (Nova answers 410).")
POSITION_EXPIRED = _declare(
    "api.position_expired", 410, "An event stream can no longer resume from the position asked for."
)
REQUEST_TOO_LARGE = _declare("api.request_too_large", 413, "The request body is over the size limit.")
UNSUPPORTED_MEDIA_TYPE = _declare(
    "api.unsupported_media_type", 415, "The body's Content-Type is not one the route accepts."
)
TOO_MANY_REQUESTS = _declare(
    "api.too_many_requests", 429, "Too many failed logins or open event streams: retry after Retry-After."
)
INVALID_FILTER = _declare(
    "api.invalid_filter", 400, "A list's filter or sort parameter has a value it cannot take."
)
MARKER_NOT_FOUND = _declare("api.marker_not_found", 400, "A list's marker names nothing in the list.")
NOT_IMPLEMENTED = _declare(
    "api.not_implemented", 501, "The hypervisor driver has no such feature (as Nova's libvirt)."
)
UNEXPECTED = _declare(
    "api.unexpected", 500, "A bug: the message names the request id, the log has the traceback."
)
READ_MODEL_BEHIND = _declare(
    "api.read_model_behind", 503, "The read model did not reach the position asked to read after, in time."
)
READ_MODEL_UNAVAILABLE = _declare(
    "api.read_model_unavailable",
    503,
    "The read model is not available yet (PostgreSQL unreachable or not built).",
)
EVENT_LOG_UNAVAILABLE = _declare(
    "api.event_log_unavailable",
    503,
    "The event log is unreachable; the command's outcome is unknown, a retry is safe.",
)
UNTRUSTED_HISTORY = _declare(
    "api.untrusted_history",
    409,
    "The resource's history holds an event the trust check refuses (docs/trust.md): no command on it "
    "until an operator excludes that event.",
)
SERVICE_UNAVAILABLE = _declare(
    "api.service_unavailable", 503, "The API cannot reach its services yet (or a service is down): retry."
)
IDEMPOTENCY_KEY_REUSED = _declare(
    idempotency.KeyReused.code,
    422,
    "The Idempotency-Key was used before with another request (method, path or body): use a new key.",
)
IDEMPOTENCY_KEY_IN_USE = _declare(
    idempotency.KeyInUse.code,
    409,
    "Another request with the same Idempotency-Key acted at the same moment: retry to get its answer.",
)
IDEMPOTENCY_ANSWER_LOST = _declare(
    idempotency.AnswerLost.code,
    409,
    "The request acted before under its Idempotency-Key and its answer was lost: read the resource.",
)
CONSOLE_NOT_AVAILABLE = _declare(
    "compute.console_not_available", 404, "The server's host did not answer for its console output."
)

# -- the domain's errors (``commands``), with the status the API answers them with -----------------
DOMAIN_ERROR = _declare(
    domain.DomainError.code, 400, "A domain rule refused the command (no more precise code)."
)
DOMAIN_NOT_FOUND = _declare(domain.NotFound.code, 404, "The command names something that does not exist.")
INVALID_INPUT = _declare(domain.InvalidInput.code, 400, "The command's input breaks a domain rule.")
CONCURRENT_UPDATE = _declare(
    domain.Conflict.code,
    409,
    "Another request changed the resource at the same time, more than retries could absorb.",
)
INSTANCE_INVALID_STATE = _declare(
    domain.InvalidState.code, 409, "The server's state forbids the action (Nova's InstanceInvalidState)."
)
ALREADY_EXISTS = _declare(domain.AlreadyExists.code, 409, "A resource with that name or id exists.")
NO_VALID_HOST = _declare(domain.NoValidHost.code, 400, "No host can take the server (Nova's NoValidHost).")
INSUFFICIENT_RESOURCES = _declare(
    domain.InsufficientResources.code, 409, "The host has not the capacity the claim asks for."
)
GROUP_POLICY_VIOLATED = _declare(
    domain.GroupPolicyViolated.code, 409, "The host would break the server group's hard (anti-)affinity."
)
QUOTA_EXCEEDED = _declare(domain.QuotaExceeded.code, 403, "A per-project limit would be exceeded.")
NO_MORE_FIXED_IPS = _declare(domain.NoMoreFixedIps.code, 409, "The fixed network has no free address left.")
CONFLICTING_STATE = _declare(
    domain.ConflictingState.code, 409, "The request contradicts the resource's state (Nova answers 409)."
)
INSTANCE_LOCKED = _declare(
    domain.InstanceLocked.code, 409, "The server is locked and the caller is not an admin."
)
DOMAIN_FORBIDDEN = _declare(
    domain.Forbidden.code, 403, "The caller may see the resource but not change it (another project's image)."
)

# -- Placement's codes (in the body's ``errors[].code``, as Placement answers) --------------------
PLACEMENT_DEFAULT = _declare(
    "placement.undefined_code",
    ANY_STATUS,
    "Placement's code for a failure without a code of its own (any status).",
)
PLACEMENT_VERSION_UNSUPPORTED = _declare(
    "placement.version.unsupported", 406, "The requested Placement microversion is outside the range served."
)
PLACEMENT_CONCURRENT_UPDATE = _declare(
    ProviderGenerationConflict.code, 409, "The provider's or consumer's generation is not the one given."
)
PLACEMENT_DUPLICATE_NAME = _declare(DuplicateProvider.code, 409, "Another provider has the name or the uuid.")
PLACEMENT_INVENTORY_IN_USE = _declare(
    InventoryInUse.code, 409, "An inventory with allocations against it cannot be removed."
)
PLACEMENT_PROVIDER_IN_USE = _declare(
    ProviderInUse.code, 409, "A provider with allocations (or a compute host's) cannot be deleted."
)
PLACEMENT_CANNOT_DELETE_PARENT = _declare(
    CannotDeleteParent.code, 409, "A provider with child providers cannot be deleted."
)
