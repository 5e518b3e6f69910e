"""The pinned image table against the image tables bundled in the `sagemaker` package (offline JSON)."""

from __future__ import annotations

import pytest

from systems import REGISTRY as SYSTEM_NAMES
from systems import get_system, images
from systems.base import REPO_ROOT
from systems.images import DLC_REGIONS, ImagePin

PINS = {name: pin for name, pin in vars(images).items() if isinstance(pin, ImagePin)}


@pytest.mark.parametrize("pin", list(PINS.values()), ids=list(PINS))
def test_pinned_uris_match_sagemaker_tables_in_every_region(pin):
    from sagemaker.core import image_uris

    mismatches = []
    for region in pin.available_regions:
        for instance_type, gpu in (("ml.g5.xlarge", True), ("ml.m5.xlarge", False)):
            if not gpu and pin.cpu_tag is None:
                continue
            extra = {"base_framework_version": pin.sdk_base_framework_version} if pin.sdk_base_framework_version else {}
            try:
                expected = image_uris.retrieve(
                    pin.sdk_framework,
                    region,
                    version=pin.sdk_version,
                    instance_type=instance_type,
                    image_scope="inference",
                    **extra,
                )
            except ValueError as err:  # not published in this region: our table must not claim it either
                mismatches.append(
                    (region, instance_type, pin.uri(region, gpu=gpu), f"not in the sagemaker table: {err}")
                )
                continue
            if pin.uri(region, gpu=gpu) != expected:
                mismatches.append((region, instance_type, pin.uri(region, gpu=gpu), expected))
    assert mismatches == []


def test_every_system_has_a_pinned_image_or_its_own_container():
    for name in SYSTEM_NAMES:
        system = get_system(name)
        assert system.name == name
        if system.own_container is None:  # pinned here, or in its own package (checked against the SDK's tables by
            # tests/systems/test_system_contract.py)
            assert system.image is not None and ":" not in system.image.gpu_tag
        else:
            assert (REPO_ROOT / system.own_container.dockerfile).is_file()


@pytest.mark.parametrize("ignore_mode", ["GLOB", "DOCKER"])
def test_own_container_contexts_hold_what_their_dockerfiles_copy(tmp_path, ignore_mode):
    """Every COPY source of an own container's Dockerfile is in its build context as CDK stages it (the repository
    root with the container's exclude patterns), and no file outside `include` is, read both ways CDK reads them:
    glob (FileSystem.fingerprint, the emulator's image tag) and Docker's (DockerImageAsset's default ignore mode).
    A file elsewhere in an included folder's parent would change the image's hash, and rebuild it, on every edit."""
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    for name in SYSTEM_NAMES:
        own = get_system(name).own_container
        if own is None:
            continue
        staged = tmp_path / name
        options = CopyOptions(exclude=own.exclude, ignore_mode=getattr(IgnoreMode, ignore_mode))
        FileSystem.copy_directory(str(REPO_ROOT), str(staged), options)
        kept = (*(path.strip("/") for path in own.include), own.dockerfile)
        stray = [
            str(path.relative_to(staged))
            for path in staged.rglob("*")
            if path.is_file() and not any(str(path.relative_to(staged)).startswith((k + "/", k)) for k in kept)
        ]
        assert stray == [], f"{name}: its build context holds files outside include: {stray[:5]}"
        sources = [
            line.split()[1]
            for line in (REPO_ROOT / own.dockerfile).read_text().splitlines()
            if line.startswith("COPY ")
        ]
        assert sources, name
        for source in sources:
            assert (staged / source).exists(), f"{name}: {own.dockerfile} copies {source}, which its context lacks"
        top = {p.name for p in staged.iterdir()}
        assert top == {path.split("/")[0] for path in (*own.include, own.dockerfile)}, (name, top)
        assert not list(staged.rglob("__pycache__")), name


def test_legacy_systems_name_a_current_replacement():
    for name in SYSTEM_NAMES:
        system = get_system(name)
        if system.legacy:
            assert system.replacement in SYSTEM_NAMES and not get_system(system.replacement).legacy


def test_images_are_refused_where_they_are_not_published():
    from systems.images import DJL_FASTERTRANSFORMER_LEGACY

    with pytest.raises(ValueError, match="not published in region us-gov-west-1"):
        DJL_FASTERTRANSFORMER_LEGACY.uri("us-gov-west-1", gpu=True)
    assert DLC_REGIONS == tuple(sorted(DLC_REGIONS))


def test_every_pinned_image_says_which_transformers_it_ships():
    """model_build writes tokenizer files for these floors (systems/container_tokenizer.py); each comes from the
    image's build files or the pinned transformers' requirements (comments at the pins), one is inferred."""
    from systems.images import HF_CONTAINER_TRANSFORMERS, PythonStack

    floors = {
        name: (pin.python_stack.transformers_floor[:2], pin.python_stack.tokenizers_floor[:2])
        for name, pin in PINS.items()
    }
    assert floors == {
        "HF_PYTORCH_INFERENCE": ((4, 51), (0, 21)),
        "DJL_DEEPSPEED_LEGACY": ((4, 39), (0, 15)),  # huggingface_hub==0.25.1 in the image excludes tokenizers 0.14
        "DJL_FASTERTRANSFORMER_LEGACY": ((4, 34), (0, 14)),
        "DJL_LMI": ((4, 56), (0, 22)),
        "DJL_TENSORRTLLM": ((4, 45), (0, 20)),
    }
    assert [name for name, pin in PINS.items() if not pin.python_stack.verified] == ["DJL_TENSORRTLLM"]
    assert images.HF_PYTORCH_INFERENCE.python_stack.transformers == f"=={HF_CONTAINER_TRANSFORMERS}"
    with pytest.raises(ValueError, match=r"requirement '<5' names no lower bound \(==X or >=X\)"):
        PythonStack(transformers="<5", tokenizers=">=0.20").transformers_floor
