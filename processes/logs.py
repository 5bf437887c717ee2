"""The processes' log format, set once by each composition root that logs (unless a host set one)."""

from __future__ import annotations

import logging


def configure() -> None:
    """Log INFO and above to standard error with time and logger name, unless logging is set up."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
