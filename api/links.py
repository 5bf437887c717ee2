"""Nova's links and paging: ``self``/``bookmark`` links, ``limit``/``marker``, the ``*_links`` next link."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import falcon
from orjson import Fragment

from api.errors import BadRequest
from stratus import positions
from stratus.serialization import dumps

API_ROOT = "v2.1"
# Nova's [api] max_limit: the most items one page holds, whatever ``limit`` asks for.
MAX_LIMIT = 1000


# What ``quote(..., safe="")`` leaves as it is: an id made only of these (a uuid, a flavor's name)
# is its own quoted form, and a page of servers quotes three ids a row.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def quoted(item_id: str) -> str:
    return item_id if _UNRESERVED.fullmatch(item_id) else quote(item_id, safe="")


def resource_links(req: falcon.Request, collection: str, item_id: str) -> list[dict[str, str]]:
    return links_of(req, collection)(item_id)


def links_of(req: falcon.Request, collection: str) -> Callable[[str], list[dict[str, str]]]:
    """``resource_links`` for the items of one page: the request's prefix read once."""
    own = f"{req.prefix}/{API_ROOT}/{collection}/"
    mark = f"{req.prefix}/{collection}/"

    def links(item_id: str) -> list[dict[str, str]]:
        item = quoted(item_id)
        return [{"rel": "self", "href": own + item}, {"rel": "bookmark", "href": mark + item}]

    return links


def links_json(req: falcon.Request, collection: str) -> tuple[str, str]:
    """The JSON of ``links_of``'s links around an item's quoted id, as orjson serializes them:
    ``head + id + middle + id + '"}]'``."""
    own = dumps(f"{req.prefix}/{API_ROOT}/{collection}/").decode()[1:-1]
    mark = dumps(f"{req.prefix}/{collection}/").decode()[1:-1]
    return '[{"rel":"self","href":"' + own, '"},{"rel":"bookmark","href":"' + mark


def serialized_links_of(req: falcon.Request, collection: str) -> Callable[[str], Fragment]:
    """``links_of``'s links already serialized (``orjson.Fragment``, the same bytes), for a page of
    a list whose body only orjson serializes (``stratus.serialization``): made from the links'
    serialized prefixes instead of objects serialized again for every row."""
    head, middle = links_json(req, collection)

    def links(item_id: str) -> Fragment:
        item = quoted(item_id)
        return Fragment(f'{head}{item}{middle}{item}"}}]')

    return links


def bookmark(req: falcon.Request, collection: str, item_id: str) -> list[dict[str, str]]:
    return [{"rel": "bookmark", "href": f"{req.prefix}/{collection}/{quoted(item_id)}"}]


def page_params(req: falcon.Request, max_limit: int = MAX_LIMIT) -> tuple[int, str | None]:
    """``(limit, marker)``: ``limit`` capped at ``max_limit`` (400 unless a non-negative integer)."""
    raw = req.get_param("limit")
    limit = max_limit
    if raw is not None:
        try:
            value = positions.parse_natural(raw)
        except ValueError:
            raise BadRequest("limit param must be a non-negative integer") from None
        limit = min(max_limit, value)
    marker = req.get_param("marker")
    return limit, marker or None


def next_links(
    req: falcon.Request, path: str, items: Sequence[Any], limit: int, id_key: str = "id"
) -> list[dict[str, str]]:
    """Nova's rule: a full page has a ``next`` link whose marker is the page's last item (a dict, or
    a listed row, ``projections.queries.view_rows``)."""
    if not limit or len(items) < limit:
        return []
    last = items[-1]
    params: dict[str, Any] = dict(req.params)
    params["marker"] = str(last[id_key] if isinstance(last, Mapping) else getattr(last, id_key))
    href = f"{req.prefix}/{API_ROOT}/{path}?{query_string(params)}"
    return [{"rel": "next", "href": href}]


def query_string(params: dict[str, Any]) -> str:
    """``urlencode(params, doseq=True)``, whose quoting (``quote_plus``, four calls a parameter and
    value) leaves the common case, names and values of unreserved characters, as it is."""
    if all(
        type(value) is str and _UNRESERVED.fullmatch(value) and _UNRESERVED.fullmatch(name)
        for name, value in params.items()
    ):
        return "&".join(f"{name}={value}" for name, value in params.items())
    return urlencode(params, doseq=True)


def time_param(req: falcon.Request, name: str) -> datetime | None:
    """A timestamp query parameter (``changes-since``, ``changes-before``), ISO 8601; naive is UTC."""
    value = req.get_param(name)
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"Invalid input for query parameters {name}. Value: {value[:64]}.") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def int_filter(req: falcon.Request, name: str) -> int | None:
    """An integer filter (``minRam``, ``minDisk``): Nova's 400 ``Invalid <name> filter`` otherwise."""
    value = req.get_param(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"Invalid {name} filter [{value[:64]}]") from None


def id_from_ref(ref: str | int) -> str:
    """Nova accepts an id or a URL ending in it (``http://.../flavors/1``) for flavorRef and imageRef."""
    text = str(ref).strip()
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text else text
