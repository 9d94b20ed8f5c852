"""`plan --traffic --hpa FILE` against hostile names and paths, through the real CLI in a
subprocess: a Deployment or namespace Kubernetes would refuse, a `--keda` that is not
Prometheus's URL or that carries credentials (a ScaledObject stores them in plain text),
an `--hpa` in a missing folder or that is a folder. Each is one sentence and exit 2 with
no file written; a dotted Deployment's pods are matched by KEDA's regex with the dot as a
dot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SRC = Path(__file__).parents[2] / "src"
CURVE = "time,requests_per_s\n00:00,5\n06:00,120\n12:00,300\n18:00,40\n"
PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--input-len", "512",
        "--output-len", "256"]  # fmt: skip


def _plan(tmp_path: Path, hpa: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    curve = tmp_path / "day.csv"
    curve.write_text(CURVE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "infertriage", *PLAN, "--traffic", str(curve),
         "--hpa", str(hpa), *extra],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def _refused(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (("--deployment", "Llama-8B"), "--deployment 'Llama-8B' is not a Kubernetes name"),
        (("--deployment", "x" * 254), "is not a Kubernetes name"),
        (("--deployment", "-llm"), "is not a Kubernetes name"),
        (("--deployment", "a|b(.*)"), "is not a Kubernetes name"),
        (("--deployment", ""), "is not a Kubernetes name"),
        (("--namespace", "Serving"), "--namespace 'Serving' is not a Kubernetes namespace"),
        (("--namespace", "team.a"), "is not a Kubernetes namespace"),
        (("--namespace", "n" * 64), "is not a Kubernetes namespace"),
        (("--keda", "not-a-url"), "--keda takes Prometheus's http:// or https:// URL"),
        (("--keda", "ftp://prometheus:9090"), "--keda takes"),
        (("--keda", "http://"), "--keda takes"),
        (("--keda", "http://[prometheus:9090"), "--keda takes"),
        (("--keda", "http://p:9090", "--deployment", "A.B"), "is not a Kubernetes name"),
        (("--keda", "http://admin:s3cret@prometheus:9090"), "carries a user name or password"),
        (("--keda", "https://token@prometheus"), "carries a user name or password"),
        (("--keda", "http://admin:s3cret@[prometheus:9090"), "carries a user name or password"),
    ],
)
def test_a_name_or_url_kubernetes_would_refuse_is_one_sentence(
    tmp_path: Path, extra: tuple[str, ...], words: str
) -> None:
    hpa = tmp_path / "hpa.yaml"
    done = _plan(tmp_path, hpa, *extra)
    _refused(done, words)
    assert "s3cret" not in done.stderr  # a password is never echoed
    assert not hpa.exists() and not (tmp_path / "hpa-prometheus-adapter.yaml").exists()


def test_an_hpa_path_that_cannot_be_written_is_one_sentence(tmp_path: Path) -> None:
    _refused(_plan(tmp_path, tmp_path / "missing" / "hpa.yaml"), "No such file or directory")
    _refused(_plan(tmp_path, tmp_path), "Is a directory")


def test_a_dotted_deployment_is_matched_dot_for_dot_in_kedas_pod_regex(tmp_path: Path) -> None:
    hpa = tmp_path / "hpa.yaml"
    done = _plan(tmp_path, hpa, "--keda", "http://p:9090", "--deployment", "llm.v2",
                 "--namespace", "serving-1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    scaled = yaml.safe_load(hpa.read_text(encoding="utf-8"))
    assert scaled["metadata"] == {"name": "llm.v2", "namespace": "serving-1"}
    for trigger in scaled["spec"]["triggers"]:
        pods = re.search(r'pod=~"([^"]+)"', trigger["metadata"]["query"])
        assert pods is not None
        regex = re.compile(pods.group(1))  # RE2 and Python agree on this subset
        assert regex.fullmatch("llm.v2-5d9c8f7b6-x2x9q")
        assert not regex.fullmatch("llmxv2-5d9c8f7b6-x2x9q")  # the dot is no wildcard
