"""docker-compose.yml and deploy/ are checked by parsing (no Docker engine here), against the real settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from ctxbus.cli.stack_cmds import METRICS_OFFSET
from ctxbus.settings import Settings
from ctxbus.wiring import SERVICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PROMETHEUS: dict[str, Any] = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
CTXBUS = {f"ctxbus-{name}" for name in SERVICES}


def valid_env_names() -> set[str]:
    """Every environment variable ctxbus reads, from the settings models themselves."""
    names = set()

    def walk(model: type[BaseSettings]) -> None:
        prefix = str(model.model_config.get("env_prefix", "")).upper()
        for field_name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
                walk(annotation)
            else:
                names.add(prefix + field_name.upper())

    walk(Settings)
    return names


def env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in (COMPOSE["services"][service].get("environment") or {}).items()}


def test_every_required_service_is_there() -> None:
    assert {"kafka", "qdrant", "ctxbus-topics", "prometheus", *CTXBUS} <= set(COMPOSE["services"])


def test_images_are_pinned() -> None:
    for name, svc in COMPOSE["services"].items():
        image = svc.get("image", "")
        assert ":" in image and not image.endswith(":latest"), name


def test_kafka_runs_kraft_without_zookeeper() -> None:
    kafka = env("kafka")
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "CONTROLLER://" in kafka["KAFKA_LISTENERS"] and kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith("1@")
    assert "zookeeper" not in (ROOT / "docker-compose.yml").read_text().lower()
    assert "9092:9092" in COMPOSE["services"]["kafka"]["ports"]
    assert "healthcheck" in COMPOSE["services"]["kafka"]


def test_ctxbus_services_point_at_kafka_and_qdrant() -> None:
    advertised = env("kafka")["KAFKA_ADVERTISED_LISTENERS"].split("//", 1)[1]
    qdrant_port = COMPOSE["services"]["qdrant"]["ports"][0].split(":")[-1]
    for name in (*CTXBUS, "ctxbus-topics"):
        e = env(name)
        assert e["CTXBUS_KAFKA_BOOTSTRAP_SERVERS"] == advertised, name
        assert e["CTXBUS_QDRANT_URL"] == f"http://qdrant:{qdrant_port}", name


def test_every_variable_set_is_a_real_setting() -> None:
    valid = valid_env_names()
    assert "CTXBUS_KAFKA_BOOTSTRAP_SERVERS" in valid and "CTXBUS_SERVICE_METRICS_PORT" in valid
    for name in (*CTXBUS, "ctxbus-topics"):
        unknown = {k for k in env(name) if k.startswith("CTXBUS_")} - valid
        assert not unknown, f"{name} sets unknown settings {unknown}"


def test_each_service_runs_a_real_service_and_waits_for_its_dependencies() -> None:
    for name in CTXBUS:
        svc = COMPOSE["services"][name]
        assert svc["command"] == ["run", name.removeprefix("ctxbus-")]
        deps = svc["depends_on"]
        assert deps["kafka"]["condition"] == "service_healthy"
        assert deps["qdrant"]["condition"] == "service_healthy"
        assert deps["ctxbus-topics"]["condition"] == "service_completed_successfully"
    assert COMPOSE["services"]["ctxbus-topics"]["command"] == ["topics", "create"]


def test_prometheus_scrapes_each_service_on_its_metrics_port() -> None:
    targets = {t for job in PROMETHEUS["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    for name in CTXBUS:
        service = name.removeprefix("ctxbus-")
        port = int(env(name)["CTXBUS_SERVICE_METRICS_PORT"]) + METRICS_OFFSET[service]
        assert f"{name}:{port}" in targets
        assert any(p.endswith(f":{port}") for p in COMPOSE["services"][name]["ports"])
    mount = COMPOSE["services"]["prometheus"]["volumes"][0]
    assert mount.startswith("./deploy/prometheus/prometheus.yml:")


@pytest.mark.parametrize("needle", ['ENTRYPOINT ["ctxbus"]', "pip install .", "USER ctxbus"])
def test_dockerfile_builds_the_ctxbus_cli(needle: str) -> None:
    assert needle in (ROOT / "Dockerfile").read_text()
