"""deploy/'s Grafana dashboard and Prometheus files ask only for metrics the parts export: a metric
renamed in stratus/metrics.py and not in deploy/ would leave an empty panel or an alert that never
fires."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

from stratus import metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_NAME = re.compile(r"\bstratus_[a-z_]+\b")


def test_the_dashboard_is_valid_json_and_every_panel_asks_for_exported_metrics() -> None:
    board = json.loads((DEPLOY / "grafana" / "stratus.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 10
    asked = {name for expr in exprs for name in _NAME.findall(expr)}
    assert asked - metrics.exported_names() == set()


def test_the_alerts_ask_for_exported_metrics_and_the_scrape_jobs_name_every_part() -> None:
    alerts = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    asked = set(_NAME.findall(alerts))
    assert asked and asked - metrics.exported_names() == set()
    scrape = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    for part in ("api", "projector", "scheduler", "hypervisor", "notifier", "metadata"):
        assert f"job_name: stratus-{part}" in scrape


def test_the_dashboard_is_what_its_script_writes() -> None:
    built = runpy.run_path(str(DEPLOY / "grafana" / "build_dashboard.py"))["dashboard"]()
    assert json.loads((DEPLOY / "grafana" / "stratus.json").read_text()) == built


def test_each_unit_waits_for_its_parts_healthz_on_the_port_it_binds() -> None:
    systemd = DEPLOY / "systemd"
    env = dict(
        line.split("=", 1)
        for line in (systemd / "stratus.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for part in ("api", "projector", "scheduler", "hypervisor"):
        unit = (systemd / f"stratus-{part}.service").read_text()
        settings = dict(re.findall(r"^Environment=(\w+)=(.*)$", unit, re.M))
        bind = (
            settings.get("STRATUS_API_BIND") if part == "api" else env[f"STRATUS_{part.upper()}_METRICS_BIND"]
        )
        assert bind is not None
        port = bind.rpartition(":")[2]
        assert re.search(
            rf"^ExecStartPost=/usr/bin/curl .* http://127\.0\.0\.1:{port}/healthz$", unit, re.M
        ), part
        assert settings["STRATUS_LOG_FORMAT"] == "json", part
