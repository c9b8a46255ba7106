"""deploy/k8s/ read as kustomize would put it together: the resources of kustomization.yaml, the Secret its
generator makes from secrets.env.example, and lookups by kind and name (no cluster, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic_settings import BaseSettings

from ctxbus.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((K8S / "kustomization.yaml").read_text())
KEDA_SCHEMA: dict[str, Any] = json.loads((Path(__file__).parent / "keda_scaledobject.schema.json").read_text())
#: the Kubernetes version the manifests are validated against (kubernetes-validate bundles its schemas)
K8S_VERSION = "1.31"
SECRET_NAME = "ctxbus-secrets"


def env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (kustomize's ``envs`` format); comments and blank lines skipped."""
    pairs = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value
    return pairs


def generated_secret() -> dict[str, Any]:
    """The Secret kustomize's secretGenerator makes, from the example file (the real one is not committed)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME},
        "type": "Opaque",
        "stringData": env_file(K8S / "secrets.env.example"),
    }


def resources() -> list[dict[str, Any]]:
    """Every object of the kustomization's resources, in order."""
    docs = []
    for name in KUSTOMIZATION["resources"]:
        docs.extend(doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc)
    return docs


def all_objects() -> list[dict[str, Any]]:
    return [*resources(), generated_secret()]


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in all_objects() if doc["kind"] == kind}


def config() -> dict[str, str]:
    data = of_kind("ConfigMap")["ctxbus-config"]["data"]
    return {str(k): str(v) for k, v in data.items()}


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment, StatefulSet or Job."""
    return dict(workload["spec"]["template"]["spec"])


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod_spec(workload)["containers"])


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The environment a container gets: its envFrom ConfigMaps, then its env (secrets from the example)."""
    result: dict[str, str] = {}
    for source in container.get("envFrom", []):
        result.update(of_kind("ConfigMap")[source["configMapRef"]["name"]]["data"])
    secrets = env_file(K8S / "secrets.env.example")
    for item in container.get("env", []):
        if "value" in item:
            result[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == SECRET_NAME, f"{item['name']}: secret {ref['name']!r} is not generated"
            result[item["name"]] = secrets[ref["key"]]
    return result


def port_named(container: dict[str, Any], port: int | str) -> int:
    """A probe's port (a number, or the name of one of the container's ports)."""
    if isinstance(port, int):
        return port
    numbers = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in numbers, f"{container['name']}: no port named {port!r}"
    return int(numbers[port])


def valid_env_names() -> set[str]:
    """Every environment variable ctxbus reads, from the settings models and their prefixes."""
    names: set[str] = set()

    def walk(model: type[BaseSettings]) -> None:
        prefix = str(model.model_config.get("env_prefix", ""))
        for field_name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
                walk(annotation)
                continue
            names.add((prefix + field_name).upper())

    walk(Settings)
    return names
