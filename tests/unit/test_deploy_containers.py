"""deploy/compose and deploy/k8s run every part on the ports the settings name (no Docker or
Kubernetes here: the files are parsed and checked): each part is there with its command, binds the
settings' port on every interface, is probed and scraped on that port, and the parts that read the
log only get no database credentials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from processes.api import WATCH_BIND
from processes.metadata import METADATA_BIND
from stratus.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_D = Settings()


def _port(bind: str) -> int:
    return int(bind.rpartition(":")[2])


# part -> {its bind variable: the settings' default port}; the first is where it answers /metrics
BINDS: dict[str, dict[str, int]] = {
    "api": {"STRATUS_API_BIND": _port(_D.api_bind)},
    "watch": {"STRATUS_WATCH_BIND": _port(WATCH_BIND)},
    "projector": {"STRATUS_PROJECTOR_METRICS_BIND": _port(_D.projector_metrics_bind)},
    "scheduler": {"STRATUS_SCHEDULER_METRICS_BIND": _port(_D.scheduler_metrics_bind)},
    "hypervisor": {"STRATUS_HYPERVISOR_METRICS_BIND": _port(_D.hypervisor_metrics_bind)},
    "notifier": {"STRATUS_NOTIFIER_METRICS_BIND": _port(_D.notifier_metrics_bind)},
    "metadata": {
        "STRATUS_METADATA_METRICS_BIND": _port(_D.metadata_metrics_bind),
        "STRATUS_METADATA_BIND": _port(METADATA_BIND),
    },
    "serialproxy": {"STRATUS_SERIALPROXY_BIND": _port(_D.serialproxy_bind)},
    "novncproxy": {"STRATUS_NOVNCPROXY_BIND": _port(_D.novncproxy_bind)},
}
SCRAPED = ("api", "watch", "projector", "scheduler", "hypervisor", "notifier", "metadata")
LOG_ONLY = ("scheduler", "hypervisor", "notifier")  # they hold no database access


def _metrics_port(part: str) -> int:
    return next(iter(BINDS[part].values()))


def _check_binds(part: str, env: dict[str, str]) -> None:
    for variable, port in BINDS[part].items():
        assert env.get(variable) == f"0.0.0.0:{port}", (part, variable, env.get(variable))


# -- docker compose --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose" / "compose.yml").read_text()))


def test_compose_runs_every_part_on_the_settings_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for part in BINDS:
        service = services[part]
        assert service["command"] == [part] and service["image"] == "stratus:latest", part
        env = service["environment"]
        _check_binds(part, env)
        assert env["STRATUS_NATS_URL"] == "nats://nats:4222"
        assert ("DATABASE_URL" in env) is (part not in LOG_ONLY), part
        for published in service.get("ports", []):
            outside, _, inside = published.partition(":")
            assert outside == inside and int(inside) in BINDS[part].values(), (part, published)
    assert services["bootstrap"]["command"] == ["bootstrap"]
    assert {"nats", "postgres", "prometheus"} <= set(services)


def test_compose_prometheus_scrapes_every_part_on_its_metrics_port() -> None:
    scrape = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in scrape["scrape_configs"]}
    for part in SCRAPED:
        assert jobs[f"stratus-{part}"] == [f"{part}:{_metrics_port(part)}"]


# -- Kubernetes ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d), d
        assert d["kind"] == "Namespace" or d["metadata"]["namespace"] == "stratus"
    return docs


def _one(docs: list[dict[str, Any]], kinds: tuple[str, ...], name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] in kinds and d["metadata"]["name"] == name]
    assert len(found) == 1, (kinds, name)
    return found[0]


def test_kubernetes_runs_every_part_probed_and_served_on_the_settings_ports(
    manifests: list[dict[str, Any]],
) -> None:
    for part in BINDS:
        workload = _one(manifests, ("Deployment", "DaemonSet"), part)
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert container["args"] == [part], part
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        _check_binds(part, env)
        assert ("DATABASE_URL" in env) is (part not in LOG_ONLY), part
        ports = {p["containerPort"] for p in container["ports"]}
        assert ports == set(BINDS[part].values()), part
        for probe in ("livenessProbe", "readinessProbe"):
            check = container[probe]
            port = (check.get("httpGet") or check.get("tcpSocket"))["port"]
            assert port == _metrics_port(part), (part, probe)
            if part in SCRAPED:
                assert check["httpGet"]["path"] == ("/healthz" if probe == "livenessProbe" else "/readyz")
        service = _one(manifests, ("Service",), part)
        assert service["spec"]["selector"] == workload["spec"]["template"]["metadata"]["labels"]
        assert {p["targetPort"] for p in service["spec"]["ports"]} == set(BINDS[part].values())
    assert _one(manifests, ("Job",), "bootstrap")["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "bootstrap"
    ]


def test_kubernetes_prometheus_scrapes_every_pod_of_every_part(manifests: list[dict[str, Any]]) -> None:
    config = yaml.safe_load(_one(manifests, ("ConfigMap",), "prometheus")["data"]["prometheus.yml"])
    jobs = {j["job_name"]: j["dns_sd_configs"][0] for j in config["scrape_configs"]}
    for part in SCRAPED:
        sd = jobs[f"stratus-{part}"]
        assert sd["names"] == [f"{part}.stratus.svc.cluster.local"] and sd["port"] == _metrics_port(part)
        assert _one(manifests, ("Service",), part)["spec"]["clusterIP"] == "None"  # every pod's address
