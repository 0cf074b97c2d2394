#!/usr/bin/env python3
"""Loads the manifests `cadre_launch --k8s_out` writes into the official models.

Every object goes through the OpenAPI model of its kind in the `kubernetes` package
(Service, PersistentVolumeClaim, Secret, NetworkPolicy, Job) or the `kubeflow-training` package (TFJob): each key
must be a field of the model at its level, each value of the field's type, and the model's
own deserializer (with client-side validation) must build it. Then the invariants that let
a job finish are checked on the built objects.

    pip install kubernetes kubeflow-training pyyaml
    python3 tools/compat/check_k8s_manifests.py jobs.yaml tfjob.yaml
"""
import re
import sys

import yaml
from kubernetes import client as k8s
from kubeflow.training import models as kubeflow_models
from kubeflow.training.api_client import ApiClient as KubeflowApiClient

MODELS = {
    "Service": ("V1Service", k8s.ApiClient(), k8s),
    "PersistentVolumeClaim": ("V1PersistentVolumeClaim", k8s.ApiClient(), k8s),
    "Secret": ("V1Secret", k8s.ApiClient(), k8s),
    "NetworkPolicy": ("V1NetworkPolicy", k8s.ApiClient(), k8s),
    "Job": ("V1Job", k8s.ApiClient(), k8s),
    "TFJob": ("KubeflowOrgV1TFJob", KubeflowApiClient(), kubeflow_models),
}


def model_class(name, modules):
    for module in modules:
        if hasattr(module, name):
            return getattr(module, name)
    return None


def check_keys(data, type_name, modules, path, errors):
    """Every key a field of the model, recursively; values of the declared kinds."""
    list_match = re.match(r"list\[(.*)\]$", type_name)
    dict_match = re.match(r"dict\(([^,]*), (.*)\)$", type_name)
    if list_match:
        if not isinstance(data, list):
            errors.append(f"{path}: expected a list, got {type(data).__name__}")
            return
        for i, item in enumerate(data):
            check_keys(item, list_match.group(1), modules, f"{path}[{i}]", errors)
        return
    if dict_match:
        if not isinstance(data, dict):
            errors.append(f"{path}: expected a map, got {type(data).__name__}")
            return
        for key, value in data.items():
            check_keys(value, dict_match.group(2), modules, f"{path}.{key}", errors)
        return
    if type_name in ("str", "int", "float", "bool", "object", "datetime", "date"):
        allowed = {"str": (str, int, float), "int": (int,), "float": (int, float),
                   "bool": (bool,)}.get(type_name, (object,))
        if not isinstance(data, allowed):
            errors.append(f"{path}: expected {type_name}, got {data!r}")
        return
    klass = model_class(type_name, modules)
    if klass is None:
        errors.append(f"{path}: unknown model {type_name}")
        return
    if not isinstance(data, dict):
        errors.append(f"{path}: expected a {type_name} object, got {data!r}")
        return
    fields = {json_key: attr for attr, json_key in klass.attribute_map.items()}
    for key, value in data.items():
        if key not in fields:
            errors.append(f"{path}.{key}: not a field of {type_name}")
            continue
        check_keys(value, klass.openapi_types[fields[key]], modules, f"{path}.{key}", errors)


def load(document):
    kind = document.get("kind")
    if kind not in MODELS:
        raise SystemExit(f"unexpected kind {kind!r}")
    type_name, api_client, module = MODELS[kind]
    errors = []
    check_keys(document, type_name, [module, k8s], kind, errors)
    if errors:
        raise SystemExit("\n".join(errors))
    # The model's own deserializer, which validates required fields and enums.
    return kind, api_client._ApiClient__deserialize(document, type_name)


def check_job(job):
    spec = job.spec
    assert spec.completion_mode == "Indexed", job.metadata.name
    assert spec.completions == spec.parallelism >= 1, job.metadata.name
    pod = spec.template.spec
    assert pod.restart_policy in ("OnFailure", "Never"), pod.restart_policy
    assert pod.subdomain, "pods need the Service as subdomain for their DNS names"
    container = pod.containers[0]
    assert any(m.mount_path == container.working_dir for m in container.volume_mounts)
    return f"Job {job.metadata.name}: {spec.completions} indexed pods, {pod.restart_policy}"


def check_tfjob(tfjob):
    replicas = tfjob.spec.tf_replica_specs
    assert "Chief" in replicas or "Worker" in replicas
    for name, replica in replicas.items():
        assert replica.restart_policy in ("OnFailure", "Never", "ExitCode"), name
        container = replica.template.spec.containers[0]
        assert container.name == "tensorflow", container.name
        assert container.ports[0].name == "tfjob-port", container.ports[0].name
    return "TFJob " + tfjob.metadata.name + ": " + ", ".join(
        f"{name} x{replica.replicas}" for name, replica in replicas.items())


def main(paths):
    for path in paths:
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document is None:
                    continue
                kind, obj = load(document)
                if kind == "Job":
                    line = check_job(obj)
                elif kind == "TFJob":
                    line = check_tfjob(obj)
                else:
                    line = f"{kind} {obj.metadata.name}"
                print(f"{path}: {line}: loads into the official model")


if __name__ == "__main__":
    main(sys.argv[1:])
