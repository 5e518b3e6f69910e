"""Every container image any synthesized template names, checked in one place against its source of truth.

A template that names an image which does not exist deploys fine and fails an hour later (SageMaker cannot pull the
model image; CodeBuild cannot start the build). So every image reference in every template the suite synthesizes
(all example configs in all environments, and the pipeline with its GPU build option) must be one of:

  an AWS Deep Learning Container   the sagemaker package's own image table (sagemaker.core.image_uris.retrieve,
                                   offline JSON) must give exactly that URI in every region the template maps (a
                                   pin newer than the table: its newest version's, with the release in the tag)
  a CodeBuild curated image        one aws-cdk-lib names (codebuild.LinuxBuildImage), with runtime-versions that
                                   image offers (aws/aws-codebuild-docker-images, ubuntu/standard/8.0/runtimes.yml)
  our own image                    a DockerImageAsset (CDK's container-assets repository), built from a Dockerfile
                                   whose base images are pinned by tag, or in emulator mode the environment's repository

Anything else fails the test with the template, the resource and the reference.
"""

from __future__ import annotations

import functools
import json
import re

import pytest
from helpers import EXAMPLE_CASES as CASES
from helpers import ROOT

from systems import images as pinned_images
from systems.images import ImagePin

DLC_ACCOUNTS = {"763104351884"} | set(pinned_images._DLC_ACCOUNT_BY_REGION.values())
# Runtime versions each curated CodeBuild image offers (aws/aws-codebuild-docker-images, ubuntu/standard/<v>/runtimes.yml).
CODEBUILD_RUNTIMES = {
    "aws/codebuild/standard:8.0": {
        "python": {"3.10", "3.11", "3.12", "3.13", "3.14"},
        "nodejs": {"22", "24"},
    },
}
FROM_LINE = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", re.MULTILINE)


def _pins() -> list[ImagePin]:
    from stacks.pipeline_stack import GPU_BUILD_IMAGE
    from systems import all_systems, images_current

    pins = {
        id(p): p for module in (pinned_images, images_current) for p in vars(module).values() if isinstance(p, ImagePin)
    }
    # and every registered system's own pin (a system package may hold its own image)
    pins.update({id(s.image): s.image for s in all_systems().values() if s.image is not None})
    return [*pins.values(), GPU_BUILD_IMAGE]


def _render(value, mapping: dict, region: str) -> str:
    """A CloudFormation value as the URI it is in `region` (Fn::Join, Fn::FindInMap over the template's mappings,
    the pseudo parameters)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_render(p, mapping, region) for p in parts)
    if "Fn::FindInMap" in value:
        name, key, attr = value["Fn::FindInMap"]
        key = _render(key, mapping, region)
        return mapping[name][key][attr]
    if value.get("Ref") == "AWS::Region":
        return region
    if value.get("Ref") == "AWS::URLSuffix":
        return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    if value.get("Ref") == "AWS::AccountId":
        return "123456789012"
    if value.get("Ref") == "AWS::Partition":
        return "aws"
    if "Fn::Sub" in value:
        text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
        return (
            text.replace("${AWS::Region}", region)
            .replace("${AWS::URLSuffix}", "amazonaws.com")
            .replace("${AWS::AccountId}", "123456789012")
            .replace("${AWS::Partition}", "aws")
        )
    raise AssertionError(f"cannot render {json.dumps(value)}")


def _regions(template: dict, value, default_region: str) -> list[str]:
    """The regions a reference is rendered for: each key of a region mapping it uses, else the stack's region."""
    text = json.dumps(value)
    names = re.findall(r'"Fn::FindInMap": \["([^"]+)"', text)
    if names:
        return sorted(template["Mappings"][names[0]])
    return [default_region]


def _references(template: dict):
    for lid, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SageMaker::Model":
            for container in [props.get("PrimaryContainer"), *props.get("Containers", [])]:
                if container:
                    yield lid, "model", container["Image"], None
        elif resource["Type"] == "AWS::CodeBuild::Project":
            spec = props["Source"].get("BuildSpec")
            yield lid, "codebuild", props["Environment"]["Image"], spec


def _all_templates(synth, pipeline_synth):
    found = []
    for config, env in CASES:
        s = synth(config, env)
        found += [(f"{config}:{env}:{name}", t, "us-east-1") for name, t in s.templates.items()]
    _, _, template, stage_templates = pipeline_synth
    found.append(("pipeline", template, "us-east-1"))
    for stage, stacks in stage_templates.items():
        found += [(f"pipeline/{stage}/{name}", t, "us-east-1") for name, (t, _account, _path) in stacks.items()]
    return found


@functools.cache
def _table_uri(framework: str, region: str, version: str, instance_type: str, extra: tuple) -> str:
    """sagemaker.core.image_uris.retrieve, once per distinct question (the same pin recurs in many templates)."""
    from sagemaker.core import image_uris

    return image_uris.retrieve(
        framework, region, version=version, instance_type=instance_type, image_scope="inference", **dict(extra)
    )


def _check_dlc(uri: str, region: str, problems: list[str], where: str) -> None:
    repository, tag = uri.split("/", 1)[1].split(":", 1)
    pins = [p for p in _pins() if p.repository == repository and tag in (p.gpu_tag, p.cpu_tag)]
    if not pins:
        problems.append(f"{where}: {uri}: no pinned image has repository {repository} and tag {tag}")
        return
    pin = pins[0]
    gpu = tag == pin.gpu_tag
    extra = {"base_framework_version": pin.sdk_base_framework_version} if pin.sdk_base_framework_version else {}
    py = re.search(r"-(py3\d+)", tag)
    if pin.sdk_framework == "pytorch" and py:
        extra["py_version"] = py.group(1)
    try:
        expected = _table_uri(
            pin.sdk_framework,
            region,
            pin.table_version,
            "ml.g5.xlarge" if gpu else "ml.m5.xlarge",
            tuple(sorted(extra.items())),
        )
    except ValueError as err:
        problems.append(f"{where}: {uri}: the sagemaker table has no such image in {region}: {err}")
        return
    if uri != pin.from_table(expected):
        problems.append(f"{where}: {uri}: the sagemaker table gives {expected} in {region}")


def _check_codebuild(uri: str, spec, problems: list[str], where: str) -> None:
    from aws_cdk import aws_codebuild as codebuild

    # aws-cdk-lib's constants, plus the images whose runtimes.yml this test holds (standard:8.0 is newer than the
    # pinned aws-cdk-lib 2.273's constants).
    known = {
        getattr(codebuild.LinuxBuildImage, n).image_id
        for n in dir(codebuild.LinuxBuildImage)
        if n.startswith("STANDARD_")
    }
    if uri not in known | set(CODEBUILD_RUNTIMES):
        problems.append(f"{where}: {uri} is not a CodeBuild curated image aws-cdk-lib or runtimes.yml names")
        return
    runtimes = json.loads(spec)["phases"].get("install", {}).get("runtime-versions") if isinstance(spec, str) else None
    offered = CODEBUILD_RUNTIMES.get(uri)
    if offered is None:
        problems.append(f"{where}: {uri}: no runtime table for this image in this test; add it from runtimes.yml")
    elif not runtimes:
        problems.append(f"{where}: {uri}: the buildspec pins no runtime-versions (the image's defaults would change)")
    else:
        for name, version in runtimes.items():
            if str(version) not in offered.get(name, set()):
                problems.append(f"{where}: {uri} offers no {name} {version} (offers {sorted(offered.get(name, []))})")


def test_every_image_reference_in_every_template_exists_where_it_is_used(synth, pipeline_synth, gpu_pipeline):
    """gpu_pipeline: the pipeline's GPU build option, whose model build pulls the DLC build image, and an own image."""
    problems: list[str] = []
    counts = {"dlc": 0, "codebuild": 0, "asset": 0, "emulator": 0}
    for name, template, region in [*_all_templates(synth, pipeline_synth), ("gpu-pipeline", gpu_pipeline, "us-east-1")]:
        for lid, kind, value, buildspec in _references(template):
            for r in _regions(template, value, region):
                uri = _render(value, template.get("Mappings", {}), r)
                literal = re.match(r"\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.", uri)
                r = literal.group(1) if literal else r  # a stack with a known region names it in the URI
                where = f"{name} {lid} ({r})"
                account = uri.split(".", 1)[0]
                if kind == "codebuild" and not uri.startswith(tuple(DLC_ACCOUNTS)):
                    counts["codebuild"] += 1
                    _check_codebuild(uri, buildspec, problems, where)
                elif account in DLC_ACCOUNTS:
                    counts["dlc"] += 1
                    _check_dlc(uri, r, problems, where)
                elif "cdk-hnb659fds-container-assets" in uri:
                    counts["asset"] += 1
                elif re.fullmatch(
                    r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/[a-z0-9-]+:[a-z0-9-]+-[0-9a-f]{16}", uri
                ):
                    counts["emulator"] += 1  # emulator mode: the environment's own repository, tag = source hash
                else:
                    problems.append(f"{where}: {uri}: not a DLC, a CodeBuild image or our own image asset")
    assert not problems, "\n".join(problems)
    assert counts["dlc"] > 30 and counts["codebuild"] >= 6 and counts["asset"] >= 2, counts


@pytest.mark.parametrize(
    "dockerfile", sorted((ROOT / "systems").rglob("Dockerfile")), ids=lambda p: p.parent.parent.name
)
def test_own_images_pin_their_base_images_by_tag(dockerfile):
    """Our Dockerfiles' base images: a tag, never `latest` or none, so a rebuild gets the base it was tested on."""
    bases = FROM_LINE.findall(dockerfile.read_text())
    assert bases, f"{dockerfile} has no FROM"
    for base in bases:
        if base.startswith("$") or base.lower() in {"scratch"}:
            continue
        name, _, tag = base.rpartition(":")
        assert name and tag and tag != "latest" and "/" not in tag, (
            f"{dockerfile}: base image {base} is not pinned by tag"
        )
