"""``PATCH /image/v2/images/{id}``: Glance's JSON patch, read and checked as Glance reads it.

Glance takes two media types: ``application/openstack-images-v2.1-json-patch`` (RFC 6902 form:
``{"op": "replace", "path": "/name", "value": ...}``) and the older
``application/openstack-images-v2.0-json-patch`` (``{"replace": "/name", "value": ...}``), which
tempest and older clients send. ``parse`` checks the document (Glance's 400s and 403s, with its
messages); ``resolve`` turns the operations into one ``UpdateImage`` against the image as it is
(Glance's 403 for removing a base property, 409 for replacing or removing a missing one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import falcon
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from api.body import describe, read_document
from api.errors import BadRequest, Conflict, Forbidden, UnsupportedMediaType
from commands.image import UPDATABLE, Image
from commands.images.update import UpdateImage

MEDIA_TYPES = {
    "application/openstack-images-v2.0-json-patch": 4,
    "application/openstack-images-v2.1-json-patch": 10,
}
OPERATIONS = ("add", "remove", "replace")
READ_ONLY = (
    "created_at", "updated_at", "status", "checksum", "size", "virtual_size", "direct_url", "self",
    "file", "schema", "id", "os_hash_algo", "os_hash_value",
)  # fmt: skip
RESERVED = ("location", "deleted", "deleted_at")
RESERVED_PREFIX = "os_glance"
BASE = UPDATABLE  # the base properties a patch may set (never remove)


@dataclass(frozen=True)
class Change:
    """One operation of a Glance image ``PATCH`` (``add``, ``replace``, ``remove``), parsed and checked."""

    op: str
    path: str  # the property the change names (Glance's path root)
    value: Any
    draft: int


def parse(req: falcon.Request, max_bytes: int, validator: Draft202012Validator) -> list[Change]:
    content_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    draft = MEDIA_TYPES.get(content_type)
    if draft is None:
        allowed = ", ".join(sorted(MEDIA_TYPES))
        raise UnsupportedMediaType(
            f"Image PATCH expects Content-Type one of: {allowed}", headers={"Accept-Patch": allowed}
        )
    doc = read_document(req, max_bytes)
    if doc is None:
        raise BadRequest("Body expected in request.")
    if not isinstance(doc, list):
        raise BadRequest("Request body must be a JSON array of operation objects.")
    changes = []
    for raw in doc:
        if not isinstance(raw, dict):
            raise BadRequest("Operations must be JSON objects.")
        op, pointer = _operation(raw, draft)
        path = _decode(pointer)
        if len(path) != 1:
            if path[0] == "locations":
                raise Forbidden("It's not allowed to add locations if locations are invisible.")
            raise BadRequest(f"Invalid JSON pointer for this resource: '/{'/'.join(path)}'")
        if op != "remove" and "value" not in raw:
            raise BadRequest(f'Operation "{op}" requires a member named "value".')
        change = Change(op, path[0], raw.get("value"), draft)
        _validate(change, validator)
        changes.append(change)
    return changes


def _operation(raw: dict[str, Any], draft: int) -> tuple[str, str]:
    available = ", ".join(OPERATIONS)
    if draft == 10:
        op = raw.get("op")
        if op is None:
            raise BadRequest(
                f"Unable to find `op` in JSON Schema change. It must be one of the following: {available}."
            )
        if op not in OPERATIONS:
            raise BadRequest(
                f"Invalid operation: `{str(op)[:64]}`. It must be one of the following: {available}."
            )
        if "path" not in raw:
            raise BadRequest("Unable to find 'path' in JSON Schema change")
        pointer = raw["path"]
    else:
        named = [key for key in OPERATIONS if key in raw]
        if len(named) > 1:
            raise BadRequest(
                'Operation objects must contain only one member named "add", "remove", or "replace".'
            )
        if not named:
            raise BadRequest(
                'Operation objects must contain exactly one member named "add", "remove", or "replace".'
            )
        op = named[0]
        pointer = raw[op]
    if not isinstance(pointer, str):
        raise BadRequest("Invalid JSON pointer: a string is expected.")
    return op, pointer


def _decode(pointer: str) -> list[str]:
    """Glance's limited JSON pointer (``/a/b``, with ``~1`` for ``/`` and ``~0`` for ``~``)."""
    shown = pointer[:255]
    if not pointer.startswith("/"):
        raise BadRequest(f'Pointer `{shown}` does not start with "/".')
    if re.search(r"/\s*?/", pointer[1:]):
        raise BadRequest(f'Pointer `{shown}` contains adjacent "/".')
    if len(pointer) > 1 and pointer.endswith("/"):
        raise BadRequest(f'Pointer `{shown}` end with "/".')
    if pointer[1:].strip() == "/":
        raise BadRequest(f"Pointer `{shown}` does not contains valid token.")
    if re.search("~[^01]", pointer) or pointer.endswith("~"):
        raise BadRequest(f'Pointer `{shown}` contains "~" not part of a recognized escape sequence.')
    return [part.replace("~1", "/").replace("~0", "~").strip() for part in pointer.lstrip("/").split("/")]


def _validate(change: Change, validator: Draft202012Validator) -> None:
    key = change.path
    if key in READ_ONLY:
        raise Forbidden(f"Attribute '{key}' is read-only.")
    if key in RESERVED or key.startswith(RESERVED_PREFIX):
        raise Forbidden(f"Attribute '{key}' is reserved.")
    if change.op == "remove" or key == "locations":
        return
    if len(key) > 255:
        raise BadRequest("Custom property should not be greater than 255 characters.")
    error = best_match(validator.iter_errors({key: change.value}))
    if error is not None:
        raise BadRequest(describe(error))


def resolve(image: Image, changes: list[Change], *, admin: bool, project_id: str | None) -> UpdateImage:
    """The update the changes make to ``image``, in order (a later change sees an earlier one's)."""
    fields: dict[str, Any] = {}
    properties = dict(image.properties)
    for change in changes:
        key = change.path
        if key == "locations":
            if change.op == "replace" and not change.value:
                raise Forbidden("Cannot set locations to empty list.")
            raise Forbidden(f"It's not allowed to {change.op} locations if locations are invisible.")
        if key == "owner" and change.op != "remove" and not admin:
            raise Forbidden("Owner can't be updated by non admin.")
        if key == "visibility" and change.value == "public" and not admin:
            raise Forbidden("You are not authorized to complete publicize_image action.")
        if change.op == "remove":
            if key in BASE:
                raise Forbidden(f"Property {key} may not be removed.")
            if key not in properties:
                raise Conflict(f"Property {key} does not exist.")
            del properties[key]
        elif change.op == "add" and change.draft == 4 and (key in BASE or key in properties):
            raise Conflict(f"Property {key} already present.")
        elif key in BASE:
            fields[key] = change.value
        elif change.op == "replace" and key not in properties:
            raise Conflict(f"Property {key} does not exist.")
        else:
            properties[key] = change.value
    removed = tuple(k for k in image.properties if k not in properties)
    changed = {
        k: v for k, v in properties.items() if image.properties.get(k) != v or k not in image.properties
    }
    return UpdateImage(image.image_id, project_id, fields, changed, removed)
