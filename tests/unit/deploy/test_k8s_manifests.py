"""deploy/k8s/ validated offline: every core object against the Kubernetes JSON schemas that the
``kubernetes-validate`` package bundles (strict: unknown fields fail), KEDA's ScaledObject (a custom resource,
not in those schemas) against a JSON schema written from KEDA's documented ScaledObject spec and kafka scaler,
and the kustomization's own wiring. The cross-references to ctxbus itself are in test_k8s_wiring.py."""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from kubernetes_validate.utils import ValidationError as K8sValidationError

from .k8s_docs import (
    K8S,
    K8S_VERSION,
    KEDA_SCHEMA,
    KUSTOMIZATION,
    ROOT,
    all_objects,
    containers,
    env_file,
    generated_secret,
    of_kind,
    resources,
)


def validate(doc: dict[str, Any]) -> None:
    """Raise when ``doc`` is not a valid object of its kind."""
    if doc["kind"] == "ScaledObject":
        jsonschema.Draft202012Validator(KEDA_SCHEMA).validate(doc)
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def ids(docs: list[dict[str, Any]]) -> list[str]:
    return [f"{d['kind']}/{d['metadata']['name']}" for d in docs]


@pytest.mark.parametrize("doc", all_objects(), ids=ids(all_objects()))
def test_every_object_is_valid_against_its_schema(doc: dict[str, Any]) -> None:
    validate(doc)


def test_the_keda_schema_is_itself_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(KEDA_SCHEMA)


@pytest.mark.parametrize(
    ("kind", "name", "break_it"),
    [
        # a misspelt field: strict schemas refuse unknown fields
        ("Deployment", "ctxbus-retriever", lambda d: d["spec"]["template"]["spec"].update(containerz=[])),
        # a probe's port of the wrong type
        (
            "Deployment",
            "ctxbus-injector",
            lambda d: d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].update(port=[1]),
        ),
        # a StatefulSet without its selector
        ("StatefulSet", "qdrant", lambda d: d["spec"].pop("selector")),
        # KEDA's trigger metadata is a map of strings: an unquoted number is refused by the CRD
        ("ScaledObject", "ctxbus-retriever", lambda d: d["spec"]["triggers"][0]["metadata"].update(lagThreshold=20)),
        # the kafka scaler needs its consumer group
        ("ScaledObject", "ctxbus-injector", lambda d: d["spec"]["triggers"][0]["metadata"].pop("consumerGroup")),
        # an unknown spec field
        ("ScaledObject", "ctxbus-injector", lambda d: d["spec"].update(maxReplicas=3)),
    ],
)
def test_the_validators_catch_broken_objects(kind: str, name: str, break_it: Any) -> None:
    """The checks above can fail: a broken copy of each kind is refused."""
    doc = copy.deepcopy(of_kind(kind)[name])
    validate(doc)
    break_it(doc)
    with pytest.raises((K8sValidationError, jsonschema.ValidationError)):
        validate(doc)


def test_kustomization_lists_every_manifest_and_only_existing_ones() -> None:
    listed = KUSTOMIZATION["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk, f"not listed: {on_disk - set(listed)}; missing: {set(listed) - on_disk}"


def test_every_object_lands_in_the_kustomization_namespace() -> None:
    namespace = KUSTOMIZATION["namespace"]
    assert set(of_kind("Namespace")) == {namespace}
    for doc in resources():
        # kustomize sets the namespace; a hard-coded other one would be overwritten silently
        assert doc["metadata"].get("namespace", namespace) == namespace, doc["metadata"]["name"]


def test_the_secret_comes_from_a_git_ignored_env_file_with_an_example() -> None:
    (generator,) = KUSTOMIZATION["secretGenerator"]
    assert generator["name"] == "ctxbus-secrets" and generator["envs"] == ["secrets.env"]
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(K8S / "secrets.env")], cwd=ROOT, check=False, capture_output=True
    )
    assert ignored.returncode == 0, "deploy/k8s/secrets.env must be git-ignored"
    assert set(env_file(K8S / "secrets.env.example")) == {"CTXBUS_QDRANT_API_KEY", "CTXBUS_GATEWAY_SECRET"}


def test_every_secret_reference_names_a_generated_key() -> None:
    keys = set(generated_secret()["stringData"])
    used = set()
    for kind in ("Deployment", "StatefulSet", "Job"):
        for workload in of_kind(kind).values():
            for container in containers(workload):
                for item in container.get("env", []):
                    ref = item.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        assert ref["name"] == "ctxbus-secrets" and ref["key"] in keys, item
                        used.add(ref["key"])
    assert used == keys, f"generated but unused: {keys - used}"


def test_no_secret_sits_in_the_config_map() -> None:
    data = of_kind("ConfigMap")["ctxbus-config"]["data"]
    leaked = [k for k in data if any(w in k for w in ("SECRET", "API_KEY", "PASSWORD"))]
    assert not leaked, f"secrets belong in secrets.env: {leaked}"


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "Job"])
def test_every_container_has_requests_and_limits_and_runs_as_non_root(kind: str) -> None:
    for name, workload in of_kind(kind).items():
        spec = workload["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        for container in spec["containers"]:
            resources_ = container["resources"]
            for side in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources_[side]), f"{name}: {side}"
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name


def test_images_are_pinned() -> None:
    for kind in ("Deployment", "StatefulSet", "Job"):
        for name, workload in of_kind(kind).items():
            for container in containers(workload):
                image = container["image"]
                tag = image.rsplit("/", 1)[-1].partition(":")[2]
                assert tag and tag != "latest", f"{name}: {image}"
