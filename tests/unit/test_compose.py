"""docker-compose.yml, the Dockerfile and deploy/ checked by parsing (no Docker engine here).

The compose wiring is checked against ctxbus itself: environment variable names against the
settings models, commands against the real CLI parser, metrics ports against the offsets
``ctxbus run`` uses, the Qdrant server against the pinned qdrant-client.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import os
import re
import tomllib
from collections.abc import Iterator
from importlib.metadata import version as installed_version
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from ctxbus.cli.main import build_parser
from ctxbus.cli.stack_cmds import METRICS_OFFSET, cmd_run, cmd_topics_create
from ctxbus.settings import GatewaySettings, ServiceSettings, Settings
from ctxbus.wiring import SERVICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
SVC: dict[str, dict[str, Any]] = COMPOSE["services"]
PROMETHEUS: dict[str, Any] = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
DOCKERFILE = ROOT / "Dockerfile"

REQUIRED = {
    "kafka",
    "qdrant",
    "ctxbus-topics",
    "ctxbus-retriever",
    "ctxbus-injector",
    "ctxbus-recorder",
    "ctxbus-gateway",
    "prometheus",
    "grafana",
}
#: the compose services that run one ctxbus consumer service (`ctxbus run NAME`)
RUNNERS = sorted(name for name, svc in SVC.items() if (svc.get("command") or [None])[0] == "run")
#: every compose service built from the ctxbus image
CTXBUS_IMAGE_SERVICES = [*RUNNERS, "ctxbus-topics"]


# ---------------------------------------------------------------------------------------------- helpers


def valid_env_names() -> set[str]:
    """Every environment variable ctxbus reads, derived from the settings models and their env prefixes."""
    names: set[str] = set()

    def walk(model: type[BaseSettings]) -> None:
        prefix = str(model.model_config.get("env_prefix", ""))
        for field_name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
                walk(annotation)  # a nested group reads its own prefix (CTXBUS_KAFKA_ ...)
                continue
            alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
            names.add((alias or prefix + field_name).upper())

    walk(Settings)
    return names


def env(service: str) -> dict[str, str]:
    raw = SVC[service].get("environment") or {}
    if isinstance(raw, list):  # the `- KEY=value` form
        raw = dict(item.split("=", 1) for item in raw)
    return {str(k): str(v) for k, v in raw.items()}


def published(service: str) -> dict[int, int]:
    """container port -> host port of a service's `ports:` (short syntax, optionally with a host IP)."""
    result: dict[int, int] = {}
    for spec in SVC[service].get("ports") or []:
        parts = str(spec).split("/")[0].split(":")
        assert len(parts) >= 2, f"{service}: port {spec!r} is not published to the host"
        result[int(parts[-1])] = int(parts[-2])
    return result


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` -> {NAME: (host, port)}."""
    result = {}
    for item in value.split(","):
        name, _, address = item.strip().partition("://")
        host, _, port = address.rpartition(":")
        result[name] = (host, int(port))
    return result


def image_tag(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    return last.split("@")[0].partition(":")[2]


def volume_targets(service: str) -> set[str]:
    targets = set()
    for spec in SVC[service].get("volumes") or []:
        targets.add(spec["target"] if isinstance(spec, dict) else str(spec).split(":")[1])
    return targets


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


def healthcheck_text(service: str) -> str:
    test = SVC[service]["healthcheck"]["test"]
    return " ".join(test) if isinstance(test, list) else str(test)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    return [(head.upper(), rest.strip()) for head, _, rest in (item.partition(" ") for item in logical)]


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes; patterns are anchored at the root."""
    excluded = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        candidates = [path, *(str(p) for p in PurePosixPath(path).parents if str(p) != ".")]
        if any(fnmatch.fnmatch(c, pattern) or fnmatch.fnmatch(c, pattern.removeprefix("**/")) for c in candidates):
            excluded = not negate
    return excluded


# ---------------------------------------------------------------------------------------------- services


def test_every_required_service_is_there() -> None:
    missing = REQUIRED - set(SVC)
    assert not missing, f"docker-compose.yml lacks {sorted(missing)}"
    # each ctxbus consumer service (and the gateway) has its compose service, and nothing else runs `ctxbus run`
    assert sorted(f"ctxbus-{name}" for name in (*SERVICES, "gateway")) == RUNNERS


def test_images_are_pinned() -> None:
    for name, svc in SVC.items():
        image = svc.get("image", "")
        tag = image_tag(image)
        assert tag, f"{name}: image {image!r} has no tag"
        assert tag != "latest", f"{name}: image {image!r} is not pinned"
        assert re.search(r"\d", tag), f"{name}: tag {tag!r} names no version"


def test_ctxbus_services_are_built_from_the_dockerfile() -> None:
    images = {SVC[name]["image"] for name in CTXBUS_IMAGE_SERVICES}
    assert len(images) == 1, f"the ctxbus services use different images: {images}"
    for name in CTXBUS_IMAGE_SERVICES:
        build = SVC[name].get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context in {".", "./"}, f"{name} is not built from the repository's Dockerfile"


# ---------------------------------------------------------------------------------------------- kafka


def test_kafka_runs_kraft_without_zookeeper() -> None:
    kafka = env("kafka")
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "zookeeper" not in COMPOSE_TEXT.lower()
    assert not any("zookeeper" in key.lower() for key in kafka)

    listening = listeners(kafka["KAFKA_LISTENERS"])
    controller = kafka["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert controller in listening, "the controller listener is not among KAFKA_LISTENERS"
    assert listening["PLAINTEXT"][1] == 9092 and listening[controller][1] == 9093

    # one voter: this node, on the controller listener's port
    (voter,) = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    node_id, _, address = voter.partition("@")
    assert node_id == kafka["KAFKA_NODE_ID"]
    assert address == f"kafka:{listening[controller][1]}"

    protocol_map = dict(item.split(":") for item in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listening) <= set(protocol_map), "a listener has no security protocol"
    assert set(listeners(kafka["KAFKA_ADVERTISED_LISTENERS"])) <= set(listening) - {controller}
    assert kafka["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"


def test_kafka_cluster_id_is_a_kraft_uuid() -> None:
    """`kafka-storage format` refuses anything but a base64url UUID: the broker would restart forever."""
    cluster_id = env("kafka")["CLUSTER_ID"]
    assert len(cluster_id) == 22, cluster_id
    try:
        raw = base64.urlsafe_b64decode(cluster_id + "==")
    except binascii.Error as exc:
        pytest.fail(f"CLUSTER_ID {cluster_id!r} is not base64url: {exc}")
    assert len(raw) == 16


def test_kafka_keeps_its_log_on_a_volume_and_has_a_healthcheck() -> None:
    assert env("kafka")["KAFKA_LOG_DIRS"] in volume_targets("kafka")
    assert "9092" in healthcheck_text("kafka")


# ---------------------------------------------------------------------------------------------- wiring


def test_ports_are_published() -> None:
    assert published("kafka").get(9092) == 9092
    assert published("qdrant").get(6333) == 6333 and published("qdrant").get(6334) == 6334
    assert published("prometheus").get(9090) == 9090
    # a host listener is advertised on the port the host can reach
    for _, (host, port) in listeners(env("kafka")["KAFKA_ADVERTISED_LISTENERS"]).items():
        if host in {"localhost", "127.0.0.1"}:
            assert published("kafka").get(port) == port


def test_ctxbus_services_point_at_kafka_and_qdrant() -> None:
    kafka = env("kafka")
    inter_broker = kafka["KAFKA_INTER_BROKER_LISTENER_NAME"]
    host, port = listeners(kafka["KAFKA_ADVERTISED_LISTENERS"])[inter_broker]
    assert host in {"kafka", SVC["kafka"].get("hostname")}, "the in-network listener must advertise the service name"
    qdrant_http = 6333
    assert qdrant_http in published("qdrant")
    for name in CTXBUS_IMAGE_SERVICES:
        e = env(name)
        assert e["CTXBUS_KAFKA_BOOTSTRAP_SERVERS"] == f"{host}:{port}", name
        url = urlsplit(e["CTXBUS_QDRANT_URL"])
        assert (url.scheme, url.hostname, url.port) == ("http", "qdrant", qdrant_http), name


def test_every_variable_set_is_a_real_setting() -> None:
    valid = valid_env_names()
    # the derivation itself works: nested groups with their own prefixes are covered
    assert {"CTXBUS_DATA_DIR", "CTXBUS_KAFKA_BOOTSTRAP_SERVERS", "CTXBUS_QDRANT_URL"} <= valid
    assert {"CTXBUS_SERVICE_METRICS_HOST", "CTXBUS_SERVICE_METRICS_PORT"} <= valid
    assert "CTXBUS_KAFKA" not in valid and "CTXBUS_BOOTSTRAP_SERVERS" not in valid
    for name in CTXBUS_IMAGE_SERVICES:
        unknown = set(env(name)) - valid
        assert not unknown, f"{name} sets variables ctxbus does not read: {sorted(unknown)}"
    dockerfile_env = {
        key
        for instruction, args in dockerfile_instructions()
        if instruction == "ENV"
        for key in re.findall(r"(\w+)=", args)
        if key.startswith("CTXBUS_")
    }
    assert dockerfile_env, "the Dockerfile sets no CTXBUS_ variables"
    assert not dockerfile_env - valid, f"the Dockerfile sets unknown settings {sorted(dockerfile_env - valid)}"


@pytest.mark.parametrize("service", CTXBUS_IMAGE_SERVICES)
def test_each_service_environment_is_valid_settings(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The values parse, and mean a real cluster, the Qdrant server, /data and an outside-reachable /metrics."""
    for key in list(os.environ):
        if key.upper().startswith("CTXBUS_"):
            monkeypatch.delenv(key)
    for key, value in env(service).items():
        # compose puts the secrets from .env in place of `${NAME:?...}`
        monkeypatch.setenv(key, re.sub(r"\$\{(\w+):\?[^}]+\}", "from-dot-env-" + "x" * 20, value))
    try:
        settings = Settings()
    except ValidationError as exc:
        pytest.fail(f"{service}: its environment is not valid ctxbus settings: {exc}")
    assert not settings.kafka.embedded
    assert settings.qdrant.url
    assert settings.data_dir == Path("/data")
    assert settings.service.metrics_host == "0.0.0.0"


#: the only variables compose takes from the host environment (.env): secrets, required (`:?`)
SECRETS = {"CTXBUS_QDRANT_API_KEY", "CTXBUS_GATEWAY_SECRET", "GRAFANA_ADMIN_USER", "GRAFANA_ADMIN_PASSWORD"}
_REQUIRED_VAR = re.compile(r"\$\{(\w+):\?[^}]+\}")


def test_no_compose_interpolation_by_accident() -> None:
    """Compose substitutes `$x` from the host environment; shell variables in commands need `$$x`; the
    secrets are the only variables taken from there, and compose refuses to start without them."""
    used = set()
    for text in strings(COMPOSE):
        used.update(_REQUIRED_VAR.findall(text))
        rest = _REQUIRED_VAR.sub("", text).replace("$$", "")
        assert "$" not in rest, f"unescaped $ in {text!r}"
    assert used == SECRETS
    example = (ROOT / "deploy/compose.env.example").read_text()
    assert all(f"{name}=" in example for name in SECRETS)
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()


def test_every_port_is_published_on_the_loopback_only() -> None:
    for name, svc in SVC.items():
        for spec in svc.get("ports") or []:
            assert str(spec).startswith("127.0.0.1:"), f"{name} publishes {spec!r} beyond the host's loopback"


def test_qdrant_needs_a_key_and_grafana_an_admin_from_the_environment() -> None:
    assert env("qdrant")["QDRANT__SERVICE__API_KEY"].startswith("${CTXBUS_QDRANT_API_KEY:?")
    for name in CTXBUS_IMAGE_SERVICES:
        assert env(name)["CTXBUS_QDRANT_API_KEY"] == env("qdrant")["QDRANT__SERVICE__API_KEY"], name
    grafana = env("grafana")
    assert grafana["GF_SECURITY_ADMIN_USER"].startswith("${GRAFANA_ADMIN_USER:?")
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


@pytest.mark.parametrize("service", sorted(RUNNERS))
def test_every_ctxbus_service_keeps_its_data_dir_on_a_declared_volume(service: str) -> None:
    """The SQLite files (learning ledger, attempts, injection record, pattern-sync state) outlive containers."""
    assert env(service)["CTXBUS_DATA_DIR"] in volume_targets(service)
    named = {str(spec).split(":")[0] for spec in SVC[service]["volumes"]}
    assert named <= set(COMPOSE.get("volumes") or {}), f"{service}'s volume is not declared"


def test_the_gateway_serves_hooks_on_the_host_loopback() -> None:
    gateway = env("ctxbus-gateway")
    assert SVC["ctxbus-gateway"]["command"] == ["run", "gateway"]
    assert gateway["CTXBUS_GATEWAY_HOST"] == "0.0.0.0"  # inside the container; published on 127.0.0.1 only
    port = int(gateway["CTXBUS_GATEWAY_PORT"])
    assert published("ctxbus-gateway").get(port) == port


def test_the_gateway_requires_its_secret_from_the_environment_and_admits_the_hosts_hooks_call() -> None:
    """Issue 10, finding 4: the compose gateway needs the secret too (from .env: its data dir is not the host's),
    and its Host check admits the address the hooks on the host call (CTXBUS_GATEWAY_URL=http://127.0.0.1:9470)."""
    gateway = env("ctxbus-gateway")
    assert gateway["CTXBUS_GATEWAY_SECRET"].startswith("${CTXBUS_GATEWAY_SECRET:?")
    for name in CTXBUS_IMAGE_SERVICES:  # no other service serves HTTP the hooks call
        assert name == "ctxbus-gateway" or "CTXBUS_GATEWAY_SECRET" not in env(name), name
    port = int(gateway["CTXBUS_GATEWAY_PORT"])
    host_port = published("ctxbus-gateway")[port]
    allowed = GatewaySettings(allowed_hosts=gateway.get("CTXBUS_GATEWAY_ALLOWED_HOSTS", "")).allowed_host_list
    # the hooks' Host is 127.0.0.1:<published port>: the gateway's own port, or one the allowed list names
    assert host_port == port or f"127.0.0.1:{host_port}" in allowed
    assert "CTXBUS_GATEWAY_SECRET" in COMPOSE_TEXT.split("x-ctxbus-env")[0]  # the header says where it comes from
    example = (ROOT / "deploy/compose.env.example").read_text()
    assert "CTXBUS_GATEWAY_SECRET=" in example and "CTXBUS_GATEWAY_URL" in example


def test_every_setting_is_documented_in_the_docs() -> None:
    """docs/configuration.md documents the settings, and names the pages that document a feature's own (hooks,
    archive, pre-context); a setting counts as documented when one page names it, not two pages' halves."""
    pages = {path.name: path.read_text() for path in (ROOT / "docs").glob("*.md")}
    assert "configuration.md" in pages
    missing = sorted(
        name for name in valid_env_names() if not any(name in text or _grouped(name, text) for text in pages.values())
    )
    assert not missing, f"settings no page of docs/ mentions: {missing}"


def _grouped(name: str, readme: str) -> bool:
    """A setting documented in a grouped row: `CTXBUS_X_A` / `_B` (the docs' style for families)."""
    head, _, _ = name.rpartition("_")
    while head:
        if f"`_{name[len(head) + 1 :]}`" in readme and head in readme:
            return True
        head, _, _ = head.rpartition("_")
    return False


def test_dependencies_have_conditions() -> None:
    for name in RUNNERS:
        deps = SVC[name]["depends_on"]
        assert isinstance(deps, dict), f"{name}: depends_on without conditions"
        assert deps["kafka"]["condition"] == "service_healthy", name
        assert deps["qdrant"]["condition"] == "service_healthy", name
        assert deps["ctxbus-topics"]["condition"] == "service_completed_successfully", name
    assert SVC["ctxbus-topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert SVC["ctxbus-topics"].get("restart", "no") == "no", "a one-shot init service must not restart"
    # `service_healthy` needs a healthcheck on the other side
    for name, svc in SVC.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            if isinstance(spec, dict) and spec.get("condition") == "service_healthy":
                assert "healthcheck" in SVC[dep], f"{name} waits for {dep} to be healthy, but it has no healthcheck"


def test_qdrant_is_probed_on_its_http_port() -> None:
    assert "6333" in healthcheck_text("qdrant")
    assert "/qdrant/storage" in volume_targets("qdrant")


def test_qdrant_server_is_compatible_with_the_pinned_client() -> None:
    """qdrant-client warns and may fail when server and client minor versions differ by more than one."""
    server = image_tag(SVC["qdrant"]["image"]).lstrip("v").split(".")
    client = installed_version("qdrant-client").split(".")
    assert server[0] == client[0]
    assert abs(int(server[1]) - int(client[1])) <= 1, f"qdrant {server} vs qdrant-client {client}"


# ---------------------------------------------------------------------------------------------- commands


@pytest.mark.parametrize("service", sorted(f"ctxbus-{name}" for name in SERVICES))
def test_each_service_runs_a_real_ctxbus_service(service: str) -> None:
    command = SVC[service]["command"]
    try:
        args = build_parser().parse_args(command)
    except SystemExit:
        pytest.fail(f"{service}: `ctxbus {' '.join(command)}` is not a valid ctxbus command")
    assert args.handler is cmd_run
    assert args.service == service.removeprefix("ctxbus-") and args.service in SERVICES


def test_the_init_service_creates_the_topics() -> None:
    command = SVC["ctxbus-topics"]["command"]
    try:
        args = build_parser().parse_args(command)
    except SystemExit:
        pytest.fail(f"`ctxbus {' '.join(command)}` is not a valid ctxbus command")
    assert args.handler is cmd_topics_create


# ---------------------------------------------------------------------------------------------- metrics


def metrics_port(service: str) -> int:
    """The port `ctxbus run NAME` serves /metrics on with this service's environment."""
    default = ServiceSettings.model_fields["metrics_port"].default
    base = int(env(service).get("CTXBUS_SERVICE_METRICS_PORT", default))
    return base + METRICS_OFFSET[service.removeprefix("ctxbus-")]


def scrape_targets() -> set[str]:
    return {
        target
        for job in PROMETHEUS["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    }


@pytest.mark.parametrize("service", sorted(RUNNERS))
def test_metrics_port_is_published_probed_and_scraped(service: str) -> None:
    port = metrics_port(service)
    assert f"{service}:{port}" in scrape_targets(), f"Prometheus does not scrape {service}:{port}"
    assert published(service).get(port) == port
    assert f":{port}/readyz" in healthcheck_text(service)  # ready, not merely alive


def test_prometheus_scrapes_only_real_targets_every_5s() -> None:
    expected = {f"{service}:{metrics_port(service)}" for service in RUNNERS}
    assert scrape_targets() == expected
    assert PROMETHEUS["global"]["scrape_interval"] == "5s"
    for job in PROMETHEUS["scrape_configs"]:
        assert job.get("scrape_interval", "5s") == "5s"
        assert job.get("metrics_path", "/metrics") == "/metrics"


def test_prometheus_mounts_this_config() -> None:
    prometheus = SVC["prometheus"]
    mounts = {str(v).split(":")[0]: str(v).split(":")[1] for v in prometheus["volumes"]}
    assert mounts.get("./deploy/prometheus/prometheus.yml") == "/etc/prometheus/prometheus.yml"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]


# ---------------------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_entrypoint_is_the_ctxbus_cli() -> None:
    assert DOCKERFILE.is_file()
    instructions = dockerfile_instructions()
    entrypoints = [args for instruction, args in instructions if instruction == "ENTRYPOINT"]
    assert entrypoints, "no ENTRYPOINT"
    assert json.loads(entrypoints[-1]) == ["ctxbus"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "ctxbus" in scripts, "the entrypoint names a console script pyproject.toml does not install"


def test_dockerfile_installs_the_project_as_a_non_root_user() -> None:
    instructions = dockerfile_instructions()
    (base,) = [args for instruction, args in instructions if instruction == "FROM"]
    assert base == "python:3.11-slim"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ">=3.11" in requires and "<3.14" in requires  # the image's 3.11 is the oldest supported
    assert any(instruction == "RUN" and "pip install ." in args for instruction, args in instructions)
    users = [args for instruction, args in instructions if instruction == "USER"]
    assert users and users[-1] not in {"root", "0"}, "the image runs as root"
    assert users[-1] == "ctxbus"


def test_dockerfile_copies_what_the_build_needs_and_dockerignore_keeps_it() -> None:
    copied = {
        src
        for instruction, args in dockerfile_instructions()
        if instruction == "COPY" and not args.startswith("--from")
        for src in args.split()[:-1]
        if not src.startswith("--")
    }
    needed = {"pyproject.toml", "README.md", "services"}
    # symlinks inside the package (services/ctxbus/schemas -> ../../schemas) need their targets too
    for link in (ROOT / "services").rglob("*"):
        if link.is_symlink():
            needed.add(link.resolve().relative_to(ROOT).parts[0])
    assert needed <= copied, f"the Dockerfile does not COPY {sorted(needed - copied)}"
    for path in needed:
        assert (ROOT / path).exists(), path
        assert not dockerignore_excludes(path), f".dockerignore excludes {path}, which the build needs"
    for heavy in (".venv", ".git"):
        assert dockerignore_excludes(heavy), f".dockerignore lets {heavy} into the build context"


# ---------------------------------------------------------------------------------------------- Grafana

GRAFANA = ROOT / "deploy/grafana"


def bind_mounts(service: str) -> dict[str, str]:
    """host path -> container path of a service's bind mounts (short syntax)."""
    mounts = {}
    for spec in SVC[service].get("volumes") or []:
        source, target = str(spec).split(":")[:2]
        if source.startswith("./"):
            mounts[source.rstrip("/")] = target.rstrip("/")
    return mounts


def grafana_datasource() -> dict[str, Any]:
    config = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (datasource,) = config["datasources"]
    assert isinstance(datasource, dict)
    return datasource


def test_grafana_is_published_keeps_its_state_and_waits_for_prometheus() -> None:
    assert published("grafana").get(3000) == 3000
    assert "3000/api/health" in healthcheck_text("grafana")
    assert SVC["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"
    assert "/var/lib/grafana" in volume_targets("grafana")
    named = {str(spec).split(":")[0] for spec in SVC["grafana"]["volumes"] if not str(spec).startswith(".")}
    assert named and named <= set(COMPOSE.get("volumes") or {}), "grafana's volume is not declared"


def test_grafana_provisioning_is_mounted_and_reaches_prometheus() -> None:
    mounts = bind_mounts("grafana")
    assert mounts.get("./deploy/grafana/provisioning") == "/etc/grafana/provisioning"
    for host in mounts:
        assert (ROOT / host).is_dir(), f"grafana mounts {host}, which does not exist"
    datasource = grafana_datasource()
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True
    url = urlsplit(datasource["url"])
    # Prometheus by its compose service name, on the port it listens on inside the network
    assert url.hostname == "prometheus" and url.port in published("prometheus")
    assert datasource["jsonData"]["timeInterval"] == PROMETHEUS["global"]["scrape_interval"]


def test_grafana_loads_the_dashboards_from_where_they_are_mounted() -> None:
    config = yaml.safe_load((GRAFANA / "provisioning/dashboards/ctxbus.yml").read_text())
    mounted = {target: host for host, target in bind_mounts("grafana").items()}
    dashboards = []
    for provider in config["providers"]:
        assert provider["type"] == "file"
        path = provider["options"]["path"].rstrip("/")
        assert path in mounted, f"the provider reads {path}, which nothing is mounted at"
        dashboards.extend(sorted((ROOT / mounted[path]).glob("*.json")))
    assert dashboards, "no dashboard is provisioned"
    home = env("grafana")["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    home_dir, _, home_file = home.rpartition("/")
    assert (ROOT / mounted[home_dir] / home_file).is_file(), f"the home dashboard {home} is not provisioned"


def test_grafana_panels_query_the_provisioned_data_source() -> None:
    uid = grafana_datasource()["uid"]
    uids = set()
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text())
        assert dashboard["uid"] not in uids, f"{path.name}: duplicate dashboard uid"
        uids.add(dashboard["uid"])
        queried = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
        assert queried, f"{path.name} has no panels"
        for panel in queried:
            assert panel["datasource"]["uid"] == uid, f"{path.name}: {panel['title']!r} queries another data source"
            assert panel["targets"], f"{path.name}: {panel['title']!r} has no query"
            for target in panel["targets"]:
                assert target.get("datasource", {"uid": uid})["uid"] == uid
                assert target["expr"].strip(), f"{path.name}: {panel['title']!r} has an empty query"
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, f"{path.name}: {panel['title']!r} is wider than the grid"
