"""Instance facts: every SageMaker hosting type (botocore's enum) has complete facts or an explicit refusal, the
facts agree with their sources (facts/instances.py names them), and the config uses them."""

from __future__ import annotations

import re

import pytest

from deployment import load_config
from endpoint_config import ConfigError
from facts.instances import FAMILIES, GAUDI, GPU, NEURON, REFUSED_FAMILIES, hosting_instance_types, parse_instance_type

MIB = 2**20


def test_every_hosting_type_has_complete_facts_or_an_explicit_refusal():
    """Walks botocore's whole ProductionVariantInstanceType enum: a type SageMaker accepts must never fall through
    to "CPU only" because its family is missing (that picked the CPU image for ml.g7e.* before)."""
    missing = []
    for name in sorted(hosting_instance_types()):
        instance = parse_instance_type(name)
        if instance.family in REFUSED_FAMILIES:
            assert instance.unknown_reason == REFUSED_FAMILIES[instance.family], name
            continue
        if instance.unknown_reason is not None:
            missing.append(f"{name}: {instance.unknown_reason[:80]}")
            continue
        family = FAMILIES[instance.family]
        assert family.source, f"{name}: family {instance.family!r} names no source"
        acc = family.accelerators
        if acc is not None:
            assert acc.kind in (GPU, NEURON, GAUDI) and acc.name and acc.memory_mib > 0, name
            assert acc.count_by_size[instance.size] >= 1, name
    assert not missing, "hosting types without facts or a refusal:\n" + "\n".join(missing)


def test_unknown_families_and_sizes_are_refused_not_taken_for_cpus():
    unknown = parse_instance_type("ml.x9zz.4xlarge")
    assert "instance family 'x9zz' has no recorded facts" in unknown.unknown_reason
    assert all(f" {family}," in unknown.unknown_reason for family in ("g7e", "p5", "m5"))  # names what is known
    assert not unknown.is_gpu and not unknown.has_local_nvme
    odd_size = parse_instance_type("ml.p5.24xlarge")  # P5 exists, this size does not
    assert (
        "size '24xlarge' is not recorded" in odd_size.unknown_reason and "4xlarge, 48xlarge" in odd_size.unknown_reason
    )
    assert parse_instance_type("ml.p6e-gb200.36xlarge").unknown_reason == REFUSED_FAMILIES["p6e-gb200"]


# (type, kind, accelerator name, count, memory per device in MiB, local NVMe), as [EC2-API] / [NEURON] state them.
SPOT_CHECKS = [
    ("ml.p5.48xlarge", GPU, "NVIDIA H100", 8, 80 * 1024, True),
    ("ml.p5.4xlarge", GPU, "NVIDIA H100", 1, 80 * 1024, True),
    ("ml.g5.12xlarge", GPU, "NVIDIA A10G", 4, 22888, True),
    ("ml.g5.xlarge", GPU, "NVIDIA A10G", 1, 22888, True),
    ("ml.g6.48xlarge", GPU, "NVIDIA L4", 8, 22888, True),
    ("ml.g6e.xlarge", GPU, "NVIDIA L40S", 1, 45776, True),
    ("ml.g6e.12xlarge", GPU, "NVIDIA L40S", 4, 45776, True),
    ("ml.g4dn.12xlarge", GPU, "NVIDIA T4", 4, 16 * 1024, True),
    ("ml.p4d.24xlarge", GPU, "NVIDIA A100", 8, 40 * 1024, True),
    ("ml.p4de.24xlarge", GPU, "NVIDIA A100 80GB", 8, 80 * 1024, True),
    ("ml.p5e.48xlarge", GPU, "NVIDIA H200", 8, 141 * 1024, True),
    ("ml.p5en.48xlarge", GPU, "NVIDIA H200", 8, 141 * 1024, True),
    ("ml.g7e.2xlarge", GPU, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 1, 96 * 1024, True),
    ("ml.g7e.12xlarge", GPU, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 2, 96 * 1024, True),
    ("ml.g7e.48xlarge", GPU, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 8, 96 * 1024, True),
    ("ml.g7.24xlarge", GPU, "NVIDIA RTX PRO 4500 Blackwell Server Edition", 4, 32 * 1024, True),
    ("ml.p6-b200.48xlarge", GPU, "NVIDIA B200", 8, 183359, True),
    ("ml.p6-b300.48xlarge", GPU, "NVIDIA B300", 8, 275040, True),
    ("ml.p2.16xlarge", GPU, "NVIDIA K80", 16, 12 * 1024, False),
    ("ml.p3.8xlarge", GPU, "NVIDIA V100", 4, 16 * 1024, False),
    ("ml.inf1.6xlarge", NEURON, "AWS Inferentia", 4, 8 * 1024, False),
    ("ml.inf2.48xlarge", NEURON, "AWS Inferentia2", 12, 32 * 1024, False),
    ("ml.trn1.32xlarge", NEURON, "AWS Trainium", 16, 32 * 1024, True),
    ("ml.trn2.48xlarge", NEURON, "AWS Trainium2", 16, 96 * 1024, True),
    ("ml.dl1.24xlarge", GAUDI, "Habana Gaudi HL-205", 8, 32 * 1024, True),
]


@pytest.mark.parametrize("name,kind,accelerator,count,memory_mib,nvme", SPOT_CHECKS, ids=[s[0] for s in SPOT_CHECKS])
def test_known_accelerator_facts(name, kind, accelerator, count, memory_mib, nvme):
    instance = parse_instance_type(name)
    assert (instance.accelerators.kind, instance.accelerators.name) == (kind, accelerator)
    assert instance.accelerator_count == count and instance.accelerators.memory_mib == memory_mib
    assert instance.has_local_nvme is nvme
    # Only NVIDIA GPUs count as GPUs: Neuron and Gaudi devices never get the CUDA image or a GPU-only system.
    assert (instance.gpu_count, instance.is_gpu) == ((count, True) if kind == GPU else (0, False))


def test_decimal_gigabytes_as_aws_sells_them():
    """AWS sells the A10G/L4 as 24 GB and the L40S as 48 GB: decimal gigabytes, which the EC2 API gives in MiB."""
    for name, gb in (("ml.g5.12xlarge", 24), ("ml.g6.xlarge", 24), ("ml.g6e.xlarge", 48)):
        assert parse_instance_type(name).accelerators.memory_mib * MIB == pytest.approx(gb * 1e9, rel=1e-4), name


CPU_ONLY = ["ml.m5.xlarge", "ml.c6i.large", "ml.r7i.48xlarge", "ml.c7g.16xlarge", "ml.t2.medium", "ml.m8g.medium"]


@pytest.mark.parametrize("name", CPU_ONLY)
def test_cpu_only_families_have_no_accelerator(name):
    instance = parse_instance_type(name)
    assert instance.unknown_reason is None and instance.accelerators is None
    assert not instance.is_gpu and not instance.has_local_nvme


def test_cpu_families_have_local_nvme_exactly_when_named_with_d():
    """[EC2-UG] naming convention: the capability letters after the generation include `d` for instance store
    volumes. For the accelerator-less families the recorded NVMe flag must say the same."""
    checked = 0
    for name, family in FAMILIES.items():
        if family.accelerators is not None:
            continue
        capabilities = re.fullmatch(r"[a-z]+\d+([a-z]*)", name).group(1)
        assert family.local_nvme == ("d" in capabilities), name
        checked += 1
    assert checked >= 25
    assert (
        parse_instance_type("ml.r7gd.medium").has_local_nvme and not parse_instance_type("ml.c6gn.large").has_local_nvme
    )


def _load(tmp_path, **fields):
    body = {"name": "ep", "system": "hf-fastload", "model": "EleutherAI/gpt-j-6B", "dtype": "fp16", **fields}
    path = tmp_path / "endpoints.yaml"
    path.write_text("endpoints:\n  - " + "\n    ".join(f"{k}: {v}" for k, v in body.items()) + "\n")
    return load_config(path)


def _error(tmp_path, **fields) -> str:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, **fields)
    return str(err.value)


def test_tensor_parallel_8_is_refused_on_the_one_gpu_p5(tmp_path):
    message = _error(tmp_path, instance_type="ml.p5.4xlarge", tensor_parallel_degree=8)
    assert (
        "endpoint 'ep': tensor_parallel_degree: value 8 does not divide the 1 GPUs of ml.p5.4xlarge; allowed: 1"
        in message
    )
    [ep] = _load(tmp_path, instance_type="ml.p5.48xlarge", tensor_parallel_degree=8).endpoints  # eight H100 there
    assert ep.tensor_parallel_degree == 8


def test_new_gpu_families_get_the_gpu_image(tmp_path):
    [plan] = _load(tmp_path, instance_type="ml.g6e.2xlarge").plans
    assert plan.system.name == "hf-fastload"
    assert plan.image_tag == plan.image.gpu_tag != plan.image.cpu_tag
    # Blackwell (g7e) needs an image built with CUDA >= 12.8; hf-fastload's has 12.4 (systems/checks.py)
    assert "needs an image built with CUDA >= 12.8; this one has CUDA 12.4" in _error(
        tmp_path, instance_type="ml.g7e.2xlarge"
    )


@pytest.mark.parametrize(
    "system,instance_type",
    [("hf-fastload", "ml.inf2.xlarge"), ("lmi-vllm", "ml.trn1.2xlarge"), ("hf-fastload", "ml.dl1.24xlarge")],
)
def test_non_gpu_accelerators_run_no_system(tmp_path, system, instance_type):
    message = _error(tmp_path, system=system, instance_type=instance_type)
    assert f"instance_type: value {instance_type!r} has " in message and "not NVIDIA GPUs" in message
    assert f"system {system!r} runs on NVIDIA GPUs (CUDA)" in message


def test_a_type_without_verified_facts_is_refused_by_the_config(tmp_path):
    message = _error(tmp_path, instance_type="ml.p6e-gb200.36xlarge")
    assert "endpoint 'ep': instance_type: value 'ml.p6e-gb200.36xlarge' is refused: its accelerator facts" in message
    assert "use ml.p6-b200.48xlarge" in message


def test_volume_size_follows_the_nvme_facts(tmp_path):
    assert "local NVMe" in _error(tmp_path, instance_type="ml.g7e.2xlarge", volume_size_gb=100)
    [ep] = _load(tmp_path, instance_type="ml.p3.2xlarge", volume_size_gb=100).endpoints  # P3: EBS only
    assert ep.volume_size_gb == 100
