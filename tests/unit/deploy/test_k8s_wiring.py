"""deploy/k8s/ checked against ctxbus itself: environment names against the settings models, values parsed
by them, commands by the real CLI parser, metrics ports against ``ctxbus run``'s offsets, probe paths against
the health endpoints, selectors against pod labels, the ScaledObjects against the Deployments, the consumer
groups and the topics the services use, the Qdrant server against the URL and the pinned client."""

from __future__ import annotations

import os
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.main import build_parser
from ctxbus.cli.stack_cmds import METRICS_OFFSET, cmd_run, cmd_topics_create
from ctxbus.contract.topics import Topics
from ctxbus.health import Health, with_health
from ctxbus.settings import Settings
from ctxbus.state_groups import consumer_group
from ctxbus.wiring import SERVICES

from .k8s_docs import config, container_env, containers, of_kind, pod_spec, port_named, valid_env_names

#: what each scaled service's main consumer loop reads (wiring.build_runners)
MAIN_INPUT = {"retriever": "retrieval_requested", "injector": "retrieval_completed"}
RUN = sorted((*SERVICES, "gateway"))


def deployment_of(service: str) -> dict[str, Any]:
    deployments = of_kind("Deployment")
    name = f"ctxbus-{service}"
    assert name in deployments, f"no Deployment {name}"
    return deployments[name]


def settings_of(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in list(os.environ):
        if key.upper().startswith("CTXBUS_"):
            monkeypatch.delenv(key)
    for key, value in container_env(container).items():
        monkeypatch.setenv(key, value)
    try:
        return Settings()
    except ValidationError as exc:
        pytest.fail(f"{container['name']}: its environment is not valid ctxbus settings: {exc}")


def test_every_variable_set_is_a_real_setting() -> None:
    valid = valid_env_names()
    assert {"CTXBUS_KAFKA_BOOTSTRAP_SERVERS", "CTXBUS_QDRANT_URL", "CTXBUS_SERVICE_METRICS_PORT"} <= valid
    assert not set(config()) - valid, f"unknown settings in the ConfigMap: {sorted(set(config()) - valid)}"
    for kind in ("Deployment", "Job"):
        for name, workload in of_kind(kind).items():
            for container in containers(workload):
                unknown = {k for k in container_env(container) if k not in valid}
                assert not unknown, f"{name} sets variables ctxbus does not read: {sorted(unknown)}"


@pytest.mark.parametrize("service", RUN)
def test_each_service_runs_a_real_ctxbus_service_on_a_cluster(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (container,) = containers(deployment_of(service))
    args = build_parser().parse_args(container["args"])
    assert args.handler is cmd_run and args.service == service
    settings = settings_of(container, monkeypatch)
    assert not settings.kafka.embedded and settings.qdrant.url
    assert settings.archive.enabled is False  # the cluster keeps the history
    assert settings.service.metrics_host == "0.0.0.0"
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert str(settings.data_dir) in mounts, f"{service}: DATA_DIR {settings.data_dir} is not a volume"


@pytest.mark.parametrize("service", RUN)
def test_probes_ask_the_health_endpoints_on_the_service_metrics_port(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (container,) = containers(deployment_of(service))
    settings = settings_of(container, monkeypatch)
    metrics_port = settings.service.metrics_port + METRICS_OFFSET[service]
    assert port_named(container, "metrics") == metrics_port
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == probes["startupProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    for probe in probes.values():
        assert port_named(container, probe["port"]) == metrics_port
    annotations = deployment_of(service)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(metrics_port)


def test_the_probed_paths_are_the_ones_the_services_serve() -> None:
    """/healthz answers 200 while alive; /readyz 503 until every check passes (ctxbus.health)."""
    status: list[str] = []
    app = with_health(lambda environ, start: [b""], Health())
    for path in ("/healthz", "/readyz"):
        app({"PATH_INFO": path}, lambda s, headers: status.append(s))
    assert status == ["200 OK", "503 Service Unavailable"]


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_selectors_match_their_pod_labels(kind: str) -> None:
    for name, workload in of_kind(kind).items():
        selector = workload["spec"]["selector"]["matchLabels"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector and selector.items() <= labels.items(), name
        others = [n for n, w in of_kind(kind).items() if n != name]
        for other in others:  # no workload adopts another's pods
            other_labels = of_kind(kind)[other]["spec"]["template"]["metadata"]["labels"]
            assert not selector.items() <= other_labels.items(), f"{name} selects {other}'s pods"


def test_every_service_selects_pods_and_ports_that_exist() -> None:
    pods = [w["spec"]["template"] for kind in ("Deployment", "StatefulSet") for w in of_kind(kind).values()]
    for name, service in of_kind("Service").items():
        chosen = [p for p in pods if service["spec"]["selector"].items() <= p["metadata"]["labels"].items()]
        assert chosen, f"Service {name} selects no pod"
        for port in service["spec"]["ports"]:
            for pod in chosen:
                (container,) = pod["spec"]["containers"]
                port_named(container, port["targetPort"])


def test_the_scaled_objects_target_the_retriever_and_injector_deployments() -> None:
    scaled = of_kind("ScaledObject")
    targets = {so["spec"]["scaleTargetRef"]["name"] for so in scaled.values()}
    assert targets == {"ctxbus-retriever", "ctxbus-injector"}
    for so in scaled.values():
        ref = so["spec"]["scaleTargetRef"]
        assert ref.get("kind", "Deployment") == "Deployment" and ref.get("apiVersion", "apps/v1") == "apps/v1"


@pytest.mark.parametrize("service", sorted(MAIN_INPUT))
def test_each_trigger_watches_the_group_and_topic_the_service_consumes(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (so,) = [s for s in of_kind("ScaledObject").values() if s["spec"]["scaleTargetRef"]["name"] == f"ctxbus-{service}"]
    (container,) = containers(deployment_of(service))
    settings = settings_of(container, monkeypatch)
    (trigger,) = so["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "kafka"
    assert meta["bootstrapServers"] == settings.kafka.bootstrap_servers
    assert meta["consumerGroup"] == consumer_group(settings.topic_prefix, service)
    assert meta["topic"] == getattr(Topics(settings.topic_prefix), MAIN_INPUT[service])
    # a new group starts where the services start (no committed offset yet)
    client = KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=False)
    assert meta["offsetResetPolicy"] == client.consumer(service, None)["auto_offset_reset"]
    # replicas past the partitions would sit idle: the bound stays within them, and at least one member runs
    spec = so["spec"]
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= settings.kafka.topic_partitions
    assert deployment_of(service)["spec"]["replicas"] == spec["minReplicaCount"]


def test_the_unscaled_services_keep_one_replica() -> None:
    """The recorder's SQLite record has one writer (and a volume of its own)."""
    recorder = deployment_of("recorder")
    assert recorder["spec"]["replicas"] == 1 and recorder["spec"]["strategy"]["type"] == "Recreate"
    volumes = {v["name"]: v for v in pod_spec(recorder)["volumes"]}
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert claim in of_kind("PersistentVolumeClaim")


def test_the_topics_job_creates_the_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    (container,) = containers(of_kind("Job")["ctxbus-topics"])
    assert build_parser().parse_args(container["args"]).handler is cmd_topics_create
    settings = settings_of(container, monkeypatch)
    most = max(s["spec"]["maxReplicaCount"] for s in of_kind("ScaledObject").values())
    assert settings.kafka.topic_partitions >= most


def test_qdrant_runs_as_a_stateful_set_behind_the_url_the_services_use(monkeypatch: pytest.MonkeyPatch) -> None:
    qdrant = of_kind("StatefulSet")["qdrant"]
    assert qdrant["spec"]["serviceName"] in of_kind("Service")
    assert of_kind("Service")[qdrant["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    (claim,) = qdrant["spec"]["volumeClaimTemplates"]
    (container,) = containers(qdrant)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/qdrant/storage"
    url = urlsplit(settings_of(containers(deployment_of("retriever"))[0], monkeypatch).qdrant.url)
    service = of_kind("Service")[str(url.hostname)]
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # one API key: Qdrant requires it, the retriever sends it
    env = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"]}
    assert env["QDRANT__SERVICE__API_KEY"] == "CTXBUS_QDRANT_API_KEY"


def test_qdrant_server_is_compatible_with_the_pinned_client() -> None:
    (container,) = containers(of_kind("StatefulSet")["qdrant"])
    server = container["image"].rpartition(":")[2].lstrip("v").split(".")
    client = installed_version("qdrant-client").split(".")
    assert server[0] == client[0] and abs(int(server[1]) - int(client[1])) <= 1, (server, client)


def test_the_gateway_takes_its_secret_from_the_secret_and_serves_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    (container,) = containers(deployment_of("gateway"))
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert refs["CTXBUS_GATEWAY_SECRET"] == {"name": "ctxbus-secrets", "key": "CTXBUS_GATEWAY_SECRET"}
    settings = settings_of(container, monkeypatch)
    assert settings.gateway.secret is not None and settings.gateway.host == "0.0.0.0"
    assert port_named(container, "hooks") == settings.gateway.port
    service = of_kind("Service")["ctxbus-gateway"]
    assert [port_named(container, p["targetPort"]) for p in service["spec"]["ports"]] == [settings.gateway.port]


def test_only_the_services_that_need_a_secret_get_it() -> None:
    for service in RUN:
        (container,) = containers(deployment_of(service))
        names = {e["name"] for e in container.get("env", []) if "valueFrom" in e}
        expected = {"retriever": {"CTXBUS_QDRANT_API_KEY"}, "gateway": {"CTXBUS_GATEWAY_SECRET"}}.get(service, set())
        assert names == expected, service


def test_the_docs_document_the_manifests() -> None:
    deployment = (Path(__file__).resolve().parents[3] / "docs" / "deployment.md").read_text()
    assert "deploy/k8s/" in deployment and "ScaledObject" in deployment
