"""The AsyncAPI document lists what the notifier publishes."""

from __future__ import annotations

from projections import notifications
from schemas import asyncapi


def test_the_asyncapi_document_lists_what_the_notifier_publishes() -> None:
    assert sorted(notifications.EVENT_TYPES) == asyncapi.notification_types()
