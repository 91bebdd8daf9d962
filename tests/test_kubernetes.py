"""deploy/kubernetes (#56 item 4): every manifest passes the Kubernetes schemas
(kubernetes-validate, offline: it ships them, strict: no unknown field) and checkov finds
nothing in the directory, with each check it skips named and reasoned in the manifest; and the
numbers the manifests hold agree with the proxy's: the drain fits the grace period, the probes
ask the paths the app answers, the memory limit holds the budget, the container is the image's
user and port, its one writable place is the config's data_dir, every key variable the config
names comes from the Secret.

kubernetes-validate is in the dev extra (requirements.lock). checkov is not: its pins conflict
with the project's, so .ci/run installs it from .ci/checkov.lock into .venv-checkov; without it
the checkov test fails in CI and is skipped elsewhere, as the agent CLIs' tests are."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from proxy.cli import main
from proxy.config.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES = ROOT / "deploy" / "kubernetes"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
OFFLINE = ["--skip-download"]  # no guidelines fetched from checkov's platform
OLDEST = "1.30"  # autoscaling/v2, policy/v1 and every field used are GA from here on
# What the background work (summaries being made, the store's writes) and the store's close
# are given after the requests in flight, within the pod's grace period.
BACKGROUND_DRAIN = 5
# The checks checkov may skip: each cannot apply, and says why in its manifest.
SKIPS = {
    ("CKV_K8S_35", "Deployment.contextwarden.contextwarden"),  # keys only from the environment
    ("CKV_K8S_43", "Deployment.contextwarden.contextwarden"),  # the operator's image: no digest
    ("CKV_K8S_43", "StatefulSet.contextwarden.contextwarden-redis"),  # nor Redis's, offline
}


def manifests() -> list[Path]:
    return sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")


def resources() -> list[dict[str, Any]]:
    out = []
    for path in manifests():
        out += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return out


def resource(kind: str, name: str) -> dict[str, Any]:
    (found,) = (r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name)
    return found


def proxy() -> dict[str, Any]:
    return resource("Deployment", "contextwarden")


def container() -> dict[str, Any]:
    (only,) = proxy()["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = only
    return result


def config_text() -> str:
    text: str = resource("ConfigMap", "contextwarden-config")["data"]["config.yaml"]
    return text


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(config_text())
    return loaded


def settings(tmp_path: Path) -> Settings:
    """What the proxy makes of the ConfigMap's file."""
    path = tmp_path / "config.yaml"
    path.write_text(config_text())
    return load_settings(str(path))


def mebibytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


def test_the_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifests())
    assert {r["metadata"].get("namespace") for r in resources() if r["kind"] != "Namespace"} == {
        kustomization["namespace"]
    }


@pytest.mark.parametrize("version", [OLDEST, kubernetes_validate.latest_version()])
def test_every_manifest_passes_the_kubernetes_schemas(version: str) -> None:
    kinds = set()
    for doc in resources():
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any error
        kinds.add(doc["kind"])
    assert kinds >= {
        "Deployment",
        "Service",
        "ConfigMap",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "StatefulSet",
        "NetworkPolicy",
    }


def test_checkov_finds_nothing() -> None:
    """checkov on the directory (its Kubernetes checks, offline: no download of its
    guidelines): no failed check, no file it could not parse, and skipped only the checks of
    ``SKIPS``, each with its reason in the manifest's ``checkov.io/skip`` annotation."""
    if not CHECKOV.exists():
        message = (
            f"checkov is not installed at {CHECKOV.relative_to(ROOT)}: python3 -m venv "
            ".venv-checkov && .venv-checkov/bin/pip install --require-hashes -r "
            "requirements-pip.lock && .venv-checkov/bin/pip install --require-hashes -r "
            ".ci/checkov.lock (as .ci/run does)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    run = subprocess.run(
        [str(CHECKOV), "-d", str(KUBERNETES), "--framework", "kubernetes", *OFFLINE, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    report = json.loads(run.stdout)
    summary = report["summary"]
    assert summary["failed"] == 0 and summary["parsing_errors"] == 0, summary
    assert summary["resource_count"] >= len(resources()), summary  # every one read
    assert summary["passed"] > 100, summary
    skipped = report["results"].get("skipped_checks", [])
    assert {(c["check_id"], c["resource"]) for c in skipped} == SKIPS
    for check in skipped:
        # The manifest's annotation, CHECK=REASON: checkov reports the reason.
        assert len(check["check_result"]["suppress_comment"]) > 60, check  # a reason, not a word


def test_the_config_map_passes_check_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config_text())
    assert main(["check-config", str(path)]) == 0


def test_the_drain_fits_the_grace_period(tmp_path: Path) -> None:
    """preStop's sleep (the pod leaves the Service's endpoints meanwhile), then SIGTERM: the
    requests in flight get ``shutdown_grace_seconds``, the background work drains after them;
    the kubelet's kill comes at ``terminationGracePeriodSeconds`` from the preStop's start.
    Liveness never restarts a draining process (it stops accepting connections)."""
    spec = proxy()["spec"]["template"]["spec"]
    command = container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    sleep = int(command[1])
    grace = settings(tmp_path).shutdown_grace_seconds
    assert grace == 30
    assert sleep >= 5 and sleep + grace + BACKGROUND_DRAIN <= spec["terminationGracePeriodSeconds"]
    liveness = container()["livenessProbe"]
    assert (
        liveness["periodSeconds"] * liveness["failureThreshold"]
        > (spec["terminationGracePeriodSeconds"])
    )


def test_the_probes_ask_what_the_app_answers(tmp_path: Path) -> None:
    from proxy.app import create_app

    settings = load_settings(None).model_copy(update={"data_dir": str(tmp_path)})
    paths = {getattr(route, "path", None) for route in create_app(settings).routes}
    probes = container()
    assert probes["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert probes["livenessProbe"]["httpGet"]["path"] == "/health"
    assert probes["startupProbe"]["httpGet"]["path"] == "/health"
    assert {"/ready", "/health"} <= paths


def test_the_container_is_the_images_user_port_and_data_dir() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M).groups()  # type: ignore[union-attr]
    port = re.search(r"^EXPOSE (\d+)$", dockerfile, re.M).group(1)  # type: ignore[union-attr]
    pod = proxy()["spec"]["template"]["spec"]
    assert (
        str(pod["securityContext"]["runAsUser"]),
        str(pod["securityContext"]["runAsGroup"]),
    ) == (user)
    assert [p["containerPort"] for p in container()["ports"]] == [int(port)] == [config()["port"]]
    assert resource("Service", "contextwarden")["spec"]["ports"][0]["port"] == int(port)
    args = container()["command"]
    assert args[args.index("--port") + 1] == port and args[args.index("--host") + 1] == "0.0.0.0"
    mount = args[args.index("--config") + 1]
    # The one writable place is data_dir, an emptyDir (the Dockerfile makes it the user's).
    mounts = {m["mountPath"]: m["name"] for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts[config()["data_dir"]]]
    assert f"mkdir {config()['data_dir']}" in dockerfile
    assert "configMap" in volumes[mounts[str(Path(mount).parent)]]


def test_every_container_is_non_root_and_locked_down() -> None:
    pods = [
        r["spec"]["template"]["spec"]
        for r in resources()
        if r["kind"] in {"Deployment", "StatefulSet"}
    ]
    assert len(pods) == 2
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for each in pod["containers"]:
            context = each["securityContext"]
            assert context["runAsNonRoot"] is True and context["runAsUser"] > 10000
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_memory_limit_holds_the_budget_and_the_requests_in_flight() -> None:
    """docs/operations.md, "Memory": the budget (footprint and caches) plus a quarter of a
    gigabyte for requests in flight; requested whole (the pod is not the first evicted)."""
    resources_ = container()["resources"]
    limit = mebibytes(resources_["limits"]["memory"])
    budget = config()["limits"]["memory_budget_mb"]
    assert limit == mebibytes(resources_["requests"]["memory"]) >= budget + 256
    assert str(budget) in (ROOT / "docs" / "operations.md").read_text()
    # Redis holds the store: its bound under Redis's maxmemory, under the pod's limit.
    redis = resource("StatefulSet", "contextwarden-redis")["spec"]["template"]["spec"]
    (server,) = redis["containers"]
    maxmemory = int(re.search(r"--maxmemory (\d+)mb", server["command"][2]).group(1))  # type: ignore[union-attr]
    store = config()["checkpoints"]["max_bytes"] / 2**20
    assert store < maxmemory < mebibytes(server["resources"]["limits"]["memory"])


def test_every_key_comes_from_the_secret(tmp_path: Path) -> None:
    loaded = settings(tmp_path)
    named = {loaded.admin_key_env} | {u.api_key_env for u in loaded.upstreams.values()}
    named |= {env for team in loaded.teams.values() for env in team.key_envs}
    assert len(named - {None}) == 3
    env = {e["name"]: e for e in container()["env"]}
    for name in named:
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "contextwarden-keys", name
    # The store's address (with its password) overrides the file's.
    url = env["CONTEXTWARDEN_CHECKPOINTS__URL"]["value"]
    assert url.startswith("redis://:$(REDIS_PASSWORD)@contextwarden-redis:6379/")
    assert loaded.checkpoints.backend == "redis"


def test_the_service_budget_and_autoscaler_select_the_proxy() -> None:
    labels = proxy()["spec"]["template"]["metadata"]["labels"]
    assert proxy()["spec"]["selector"]["matchLabels"] == labels
    assert resource("Service", "contextwarden")["spec"]["selector"] == labels
    budget = resource("PodDisruptionBudget", "contextwarden")["spec"]
    assert budget["selector"]["matchLabels"] == labels
    scaler = resource("HorizontalPodAutoscaler", "contextwarden")["spec"]
    assert scaler["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "contextwarden",
    }
    assert scaler["minReplicas"] > budget["maxUnavailable"]
    assert "cpu" in container()["resources"]["requests"]  # the autoscaler's measure


def test_the_docs_show_the_config_map_and_every_file() -> None:
    """docs/operations.md, "Kubernetes": the ConfigMap's configuration whole (a YAML block,
    so tests/test_readme.py runs check-config on it too), and a line for every manifest."""
    docs = (ROOT / "docs" / "operations.md").read_text()
    section = docs.split("\n## Kubernetes\n", 1)[1].split("\n## ", 1)[0]
    assert f"```yaml\n{config_text()}```" in section
    for path in manifests():
        assert f"| `{path.name}` |" in section, path.name
    assert "kubectl apply -k deploy/kubernetes" in section
