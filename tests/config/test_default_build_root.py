"""A plan reads its artifact from the build root it is given, else from deployment.default_build_root(), which is read
when the plan is made: in the test session it is a folder of this worker, so an example's plan never reads a build an
end-to-end demo wrote into the repository's build/ under the same endpoint name (minimal.yaml's gpt2-small)."""

from __future__ import annotations

from pathlib import Path

from helpers import ROOT, write_fake_manifest

import deployment
import deployment.plan

MINIMAL = ROOT / "config" / "examples" / "minimal.yaml"


def test_the_session_plans_from_a_build_folder_of_its_own() -> None:
    root = deployment.default_build_root()
    assert not root.resolve().is_relative_to(ROOT), root  # not build/, nor anywhere in the checkout
    [plan] = deployment.load_config(MINIMAL).plans
    # what this worker's folder holds decides, never the repository's build/ (a test may build there in-process)
    assert plan.artifact.source == ("manifest" if (root / "gpt2-small" / "manifest.json").is_file() else "unbuilt")


def test_the_default_is_read_when_the_plan_is_made(tmp_path: Path, monkeypatch) -> None:
    write_fake_manifest(tmp_path, "gpt2-small", "hf-fastload", "fp16")
    monkeypatch.setattr(deployment.plan, "BUILD_ROOT", tmp_path)
    [plan] = deployment.load_config(MINIMAL).plans
    assert plan.artifact.source == "manifest"
    [given] = deployment.load_config(MINIMAL, build_root=tmp_path / "elsewhere").plans
    assert given.artifact.source == "unbuilt"
