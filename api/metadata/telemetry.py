"""What the metadata service counts: each guest's request by path and status, and its time.

Guests choose the paths they ask, so a path is a label only in a bounded form: the version segment
(``2018-08-27``, ``latest``) becomes ``{version}``, and an answer that is not a success (a path the
tree does not hold, a caller refused) is counted under ``other``. The numbers are served on the
service's own probe address (``STRATUS_METADATA_METRICS_BIND``, ``processes/telemetry.py``), never on
the port guests call.
"""

from __future__ import annotations

import re

import falcon

from api.telemetry import Timed
from stratus import metrics

OTHER = "other"  # any answer but a success: its path is the guest's choice, not the tree's
_VERSION = re.compile(r"^(latest|\d{4}-\d{2}-\d{2}|1\.0)$")
_MAX_DEPTH = 4  # /openstack/{version}/meta_data.json, /{version}/meta-data/public-keys/0


def path_label(path: str, status: int) -> str:
    """The bounded label of a request's path (``/openstack/{version}/meta_data.json``)."""
    if status >= 400:
        return OTHER
    parts = [p for p in path.split("/") if p][:_MAX_DEPTH]
    return "/" + "/".join("{version}" if _VERSION.match(p) else p for p in parts)


class RequestMetrics(Timed):
    """Middleware: counts each request by path label and status, and times it."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        elapsed = self.elapsed(req)
        status = falcon.http_status_to_code(resp.status)
        label = path_label(req.path, status)
        metrics.METADATA_REQUESTS.labels(label, str(status)).inc()
        metrics.METADATA_LATENCY.labels(label).observe(elapsed)
