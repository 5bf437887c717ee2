"""Writes stratus.json, the Grafana dashboard of Stratus's metrics (docs/operations.md, "Metrics").

Run it after changing a panel: ``python deploy/grafana/build_dashboard.py``. Standard library only;
tests/unit/test_deploy_telemetry.py checks that every metric the dashboard asks for is one a part
exports.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("stratus.json")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "[$__rate_interval]"


def quantiles(histogram: str, qs: tuple[float, ...], by: str = "") -> list[tuple[str, str]]:
    """One target per quantile of ``histogram`` (its ``_bucket`` series), summed over ``le`` and ``by``."""
    keys = ", ".join(["le", *([by] if by else [])])
    return [
        (f"histogram_quantile({q}, sum by ({keys}) (rate({histogram}_bucket{RATE})))",
         f"{{{{{by}}}}}" if by else f"p{int(q * 100)}")
        for q in qs
    ]  # fmt: skip


# (title, unit, [(PromQL, legend)]); each row of the dashboard is a list of these
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = [
    (
        "API",
        [
            (
                "Requests per second by route and status",
                "reqps",
                [
                    (
                        f"sum by (route, status) (rate(stratus_api_requests_total{RATE}))",
                        "{{status}} {{route}}",
                    )
                ],
            ),
            (
                "Latency (p50, p95, p99)",
                "s",
                quantiles("stratus_api_request_duration_seconds", (0.5, 0.95, 0.99)),
            ),
            (
                "5xx answers per second by route",
                "reqps",
                [
                    (
                        f'sum by (route) (rate(stratus_api_requests_total{{status=~"5.."}}{RATE}))',
                        "{{route}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Commands and the log",
        [
            (
                "Commands per second by outcome",
                "ops",
                [(f"sum by (outcome) (rate(stratus_commands_total{RATE}))", "{{outcome}}")],
            ),
            (
                "Concurrency retries per second",
                "ops",
                [
                    (
                        f"sum by (job) (rate(stratus_command_concurrency_retries_total{RATE}))",
                        "{{job}}",
                    )
                ],
            ),
            (
                "Log appends per second by outcome, and events appended",
                "ops",
                [
                    (
                        f"sum by (outcome) (rate(stratus_log_appends_total{RATE}))",
                        "appends {{outcome}}",
                    ),
                    (f"sum(rate(stratus_log_appended_events_total{RATE}))", "events"),
                ],
            ),
            (
                "Append latency (p50, p99)",
                "s",
                quantiles("stratus_log_append_duration_seconds", (0.5, 0.99)),
            ),
        ],
    ),
    (
        "Projector",
        [
            (
                "Lag behind the log (positions)",
                "short",
                [("max by (job, instance) (stratus_projector_lag_positions)", "{{job}} {{instance}}")],
            ),
            (
                "Lag behind the log (seconds)",
                "s",
                [("max by (job, instance) (stratus_projector_lag_seconds)", "{{job}} {{instance}}")],
            ),
            (
                "Log entries applied per second",
                "ops",
                [(f"sum(rate(stratus_projector_events_total{RATE}))", "entries")],
            ),
        ],
    ),
    (
        "Scheduler and hosts",
        [
            (
                "Placements per second by outcome",
                "ops",
                [
                    (
                        f"sum by (outcome) (rate(stratus_scheduler_placements_total{RATE}))",
                        "{{outcome}}",
                    )
                ],
            ),
            (
                "Decision time per batch (p50, p99)",
                "s",
                quantiles("stratus_scheduler_decision_seconds", (0.5, 0.99)),
            ),
            (
                "Hosts up and down",
                "short",
                [
                    ('max(stratus_hosts{state="up"})', "up"),
                    ('max(stratus_hosts{state="down"})', "down"),
                    ("max(stratus_hosts_disabled)", "disabled"),
                ],
            ),
            (
                "Consumers' pending messages",
                "short",
                [
                    ("sum by (durable) (stratus_consumer_pending)", "pending {{durable}}"),
                    ("sum by (durable) (stratus_consumer_ack_pending)", "unacknowledged {{durable}}"),
                ],
            ),
        ],
    ),
    (
        "Hypervisor workers",
        [
            (
                "Actions per second by outcome",
                "ops",
                [
                    (
                        f"sum by (action, outcome) (rate(stratus_hypervisor_actions_total{RATE}))",
                        "{{action}} {{outcome}}",
                    )
                ],
            ),
            (
                "Action time (p95) by action",
                "s",
                quantiles("stratus_hypervisor_action_duration_seconds", (0.95,), by="action"),
            ),
        ],
    ),
    (
        "Metadata service",
        [
            (
                "Guests' requests per second by path and status",
                "reqps",
                [
                    (
                        f"sum by (path, status) (rate(stratus_metadata_requests_total{RATE}))",
                        "{{status}} {{path}}",
                    )
                ],
            ),
            (
                "Latency (p50, p95, p99)",
                "s",
                quantiles("stratus_metadata_request_duration_seconds", (0.5, 0.95, 0.99)),
            ),
        ],
    ),
]


def dashboard() -> dict[str, object]:
    panels: list[dict[str, object]] = []
    y = 0
    next_id = 1
    for title, row in ROWS:
        panels.append({"type": "row", "title": title, "id": next_id, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})  # fmt: skip
        next_id += 1
        y += 1
        width = 24 // len(row)
        for i, (panel_title, unit, targets) in enumerate(row):
            panels.append(
                {
                    "type": "timeseries",
                    "title": panel_title,
                    "id": next_id,
                    "datasource": DATASOURCE,
                    "gridPos": {"h": 8, "w": width, "x": i * width, "y": y},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {
                            "refId": chr(ord("A") + n),
                            "datasource": DATASOURCE,
                            "expr": expr,
                            "legendFormat": legend,
                        }
                        for n, (expr, legend) in enumerate(targets)
                    ],
                }
            )
            next_id += 1
        y += 8
    return {
        "title": "Stratus",
        "uid": "stratus-overview",
        "description": "Stratus's control plane: API, commands, the event log, projector, scheduler, hosts "
        "(docs/operations.md, Metrics)",
        "tags": ["stratus", "openstack"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
            ]
        },
        "panels": panels,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(f"wrote {OUT}")
