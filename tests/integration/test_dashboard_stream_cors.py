"""The event stream lets the dashboard's page read it across origins (``api/watch.py``): the page is
served by the API on one port, the stream by ``stratus watch`` on another of the same host. The
browser's preflight needs no token; only pages of the same host name are allowed; the stream itself
still needs its token (the browser test, ``tests/acceptance/test_dashboard.py``, reads it so)."""

from __future__ import annotations

from api import watch
from tests.fixtures.api import Stack

PREFLIGHT = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "x-auth-token"}


def test_a_page_of_the_same_host_may_read_the_stream(stack: Stack) -> None:
    watch.add_route(stack.app, stack.log)
    origin = "http://falconframework.org:8774"  # the TestClient's host, the API's port
    answer = stack.client.simulate_options(watch.ROUTE, headers={"Origin": origin, **PREFLIGHT})
    assert answer.status_code == 204, answer.text
    assert answer.headers["Access-Control-Allow-Origin"] == origin
    assert answer.headers["Access-Control-Allow-Methods"] == "GET"
    assert answer.headers["Access-Control-Allow-Headers"] == "X-Auth-Token, Last-Event-ID"
    assert "Origin" in answer.headers["Vary"]
    assert "Access-Control-Allow-Credentials" not in answer.headers  # no cookie is ever involved


def test_a_page_of_another_host_may_not(stack: Stack) -> None:
    watch.add_route(stack.app, stack.log)
    for origin in ("http://evil.example:8774", "null", "http://falconframework.org.evil.example"):
        answer = stack.client.simulate_options(watch.ROUTE, headers={"Origin": origin, **PREFLIGHT})
        assert "Access-Control-Allow-Origin" not in answer.headers, origin


def test_the_stream_still_needs_a_token(stack: Stack) -> None:
    watch.add_route(stack.app, stack.log)
    answer = stack.client.simulate_get(watch.ROUTE, headers={"Origin": "http://falconframework.org:8774"})
    assert answer.status_code == 401
