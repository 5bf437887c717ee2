"""Request bodies: bounded in size, JSON by the one JSON policy, validated against ``schemas/api/``.

Schemas are draft 2020-12 with ``additionalProperties: false``: an unknown field is rejected, not
ignored. Each error names the field by its path (``server.flavorRef``), as Nova's messages do.
"""

from __future__ import annotations

import re
from typing import Any

import falcon
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

import schemas
from api.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from stratus import serialization

MAX_BODY_BYTES = 1024 * 1024
_VALUE_ECHO = 80
# Fields whose values an error never echoes: secrets, and user data (a guest's secrets travel there).
_NEVER_ECHOED = frozenset({"password", "adminPass", "user_data", "contents", "private_key", "secret"})
# Text no part of Stratus can keep: PostgreSQL's text and jsonb refuse NUL, and a lone surrogate is
# not Unicode (it cannot be encoded as UTF-8). Refused at the edge, before anything reaches the log.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# No request schema goes deeper than a few levels; a deeper document is refused before validation,
# whose error reporting recurses through it.
MAX_DEPTH = 32


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored (a NUL or a lone surrogate in it), or None."""
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    return "NUL characters are not allowed" if match.group() == "\x00" else "lone surrogates are not allowed"


def refuse_unstorable(doc: Any) -> None:
    """``BadRequest`` naming the first field (or key) of ``doc`` whose text cannot be stored, or for a
    document nested deeper than ``MAX_DEPTH``.

    Iterative, so a document nested as deep as the JSON parser allows costs no recursion.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise BadRequest(f"The request body is nested too deeply: more than {MAX_DEPTH} levels.")
        if isinstance(value, str):
            why = unstorable(value)
            if why:
                raise BadRequest(f"Invalid input for {_where(list(path))}: {why}.")
        elif isinstance(value, dict):
            for key, item in value.items():
                why = unstorable(key)
                if why:
                    raise BadRequest(f"Invalid input for {_where(list(path))}: in a key, {why}.")
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, str(i))) for i, item in enumerate(value))


def load_validators(names: tuple[str, ...]) -> dict[str, Draft202012Validator]:
    """Load and check the named request schemas (``schemas/api/<name>.json``) once, at app creation."""
    # Formats are checked (``uuid``, ``date-time``): unchecked, a malformed id reached PostgreSQL.
    checker = Draft202012Validator.FORMAT_CHECKER
    return {
        name: Draft202012Validator(schemas.load(f"api/{name}.json"), format_checker=checker) for name in names
    }


def read_json(req: falcon.Request, validator: Draft202012Validator, max_bytes: int) -> dict[str, Any]:
    """The request's JSON body, validated; ``ApiError``s (400, 413, 415) for anything else."""
    content_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if content_type and content_type != falcon.MEDIA_JSON:
        raise UnsupportedMediaType(f"Unsupported Content-Type {content_type[:100]!r}; use application/json.")
    if req.content_length is not None and req.content_length > max_bytes:
        raise PayloadTooLarge(f"Request is too large: the limit is {max_bytes} bytes.")
    data = req.bounded_stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"Request is too large: the limit is {max_bytes} bytes.")
    if not data.strip():
        raise BadRequest("The request body is empty; a JSON object is required.")
    try:
        doc = serialization.loads(data)
    except ValueError:
        raise BadRequest("Malformed request body: not valid JSON.") from None
    refuse_unstorable(doc)
    error = best_match(validator.iter_errors(doc))
    if error is not None:
        raise BadRequest(describe(error))
    if not isinstance(doc, dict):  # the schemas say "object"; this is for the type checker
        raise BadRequest("The request body must be a JSON object.")
    return doc


def read_document(req: falcon.Request, max_bytes: int) -> Any:
    """The request's JSON document as Glance reads one (any JSON value; its own 400 wording),
    bounded in size and storable; ``None`` for an empty body. Its callers check its shape."""
    data = req.bounded_stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"Request is too large: the limit is {max_bytes} bytes.")
    if not data.strip():
        return None
    try:
        doc = serialization.loads(data)
    except ValueError:
        raise BadRequest("Malformed JSON in request body.") from None
    refuse_unstorable(doc)
    return doc


_TRUE = frozenset({"true", "1", "on", "yes"})
MAX_INT = 2**31 - 1


def as_bool(value: Any) -> bool:
    """Nova's ``parameter_types.boolean`` after validation: a boolean, or one of its strings."""
    return value if isinstance(value, bool) else str(value).lower() in _TRUE


def as_int(value: Any, field: str, minimum: int, maximum: int = MAX_INT) -> int:
    """An integer field Nova also takes as a string of digits (``"1024"``), within its bounds."""
    number = int(value)
    if not minimum <= number <= maximum:
        raise BadRequest(
            f"Invalid input for field/attribute {field}. Value: {value!r}. "
            f"It must be between {minimum} and {maximum}."
        )
    return number


def describe(error: ValidationError) -> str:
    """Nova's wording, naming the field: ``Invalid input for field/attribute <path>. [Value: <v>.] <why>``."""
    path = [str(p) for p in error.absolute_path]
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        missing = [k for k in error.validator_value if k not in instance]
        if missing:
            return f"Invalid input for field/attribute {_dotted([*path, missing[0]])}. {error.message}"
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {})
        extra = sorted(k for k in instance if k not in allowed)
        if extra:
            return f"Invalid input for field/attribute {_dotted([*path, extra[0]])}. {_clip(error.message)}"
    where = _where(path)
    if _NEVER_ECHOED.intersection(path):  # jsonschema's own messages quote the value
        return f"Invalid input for {where}: it fails the schema's {error.validator!r} check."
    if error.validator == "type" or isinstance(instance, (dict, list)):
        return f"Invalid input for {where}. {_clip(error.message)}"
    return f"Invalid input for {where}. Value: {_clip(repr(instance))}. {_clip(error.message)}"


def _where(path: list[str]) -> str:
    return f"field/attribute {_dotted(path)}" if path else "the request body"


def _dotted(path: list[str]) -> str:
    return ".".join(path)


def _clip(text: str) -> str:
    return text if len(text) <= 4 * _VALUE_ECHO else text[: 4 * _VALUE_ECHO] + "..."
