"""The deployment examples name only settings the daemon knows: a misspelt TOOLNEXUS_* variable in
a compose file or a pod is silently ignored by a container runtime, so it is caught here instead."""

from __future__ import annotations

import re
from pathlib import Path

from toolnexus_daemon import config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CLIENT_VARIABLES = {"TOOLNEXUS_TARGET"}  # read by the clients, not the daemon


def _known() -> set[str]:
    parser = config.serve_parser({})
    helps = " ".join(a.help or "" for a in parser._actions) + " " + config.ENV_ONLY_HELP
    return set(re.findall(r"TOOLNEXUS_[A-Z_]+", helps)) | CLIENT_VARIABLES


def test_every_variable_in_the_deployment_examples_is_one_the_daemon_reads() -> None:
    files = sorted(p for p in DEPLOY.iterdir() if p.suffix in (".yaml", ".yml") or p.name == "Dockerfile")
    named = {(p.name, v) for p in files for v in re.findall(r"TOOLNEXUS_[A-Z_]+", p.read_text())}
    assert {"compose.postgres.yaml", "compose.cluster.yaml", "cluster.yaml", "pod.yaml",
            "Dockerfile"} <= {f for f, _ in named}
    assert sorted((f, v) for f, v in named if v not in _known()) == []


def test_the_postgres_example_reads_its_password_from_a_file_not_the_dsn() -> None:
    text = (DEPLOY / "compose.postgres.yaml").read_text()
    dsn = re.search(r"TOOLNEXUS_STORE: (\S+)", text)
    assert dsn and dsn.group(1).startswith("postgresql://") and ":" not in dsn.group(1).split("@")[0][13:]
    assert "TOOLNEXUS_STORE_PASSWORD_FILE: /run/secrets/" in text


def test_every_cluster_member_advertises_and_shares_the_store() -> None:
    compose = (DEPLOY / "compose.cluster.yaml").read_text()
    advertised = re.findall(r"TOOLNEXUS_ADVERTISE: (\S+)", compose)
    assert len(advertised) == len(set(advertised)) == 3
    assert compose.count("TOOLNEXUS_STORE: postgresql://") == 1  # one anchor every daemon merges
    k8s = (DEPLOY / "cluster.yaml").read_text()
    assert "value: $(POD_IP):50051" in k8s and "TOOLNEXUS_TLS_CLIENT_CA" in k8s
    # node ids are the daemon's own default (host plus a random part): unique without configuration,
    # so a copied replica never starts under a live id
    assert "TOOLNEXUS_NODE_ID" not in compose and "TOOLNEXUS_NODE_ID" not in k8s
