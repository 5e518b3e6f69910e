"""A source model that cannot be loaded is refused by name: the endpoint, its model and the loader's error, whichever
recipe reads it (every recipe reads its source through recipe_common.load_source; hf-fastload's and deepspeed-byoc's
left the endpoint out before)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ENDPOINT = """endpoints:
  - name: tiny-gpt2
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
"""


def test_a_source_whose_weights_do_not_load_is_refused_naming_the_endpoint_and_model(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    from deployment import load_config
    from model_build import BuildError
    from model_build.cli import build_endpoint

    source = tmp_path / "broken-gpt2"
    shutil.copytree(tiny_models["gpt2"], source)
    config = tmp_path / "endpoints.yaml"
    config.write_text(ENDPOINT.format(model=source))
    endpoint = load_config(config).endpoint("tiny-gpt2")  # loaded before the weights break
    [weights] = source.glob("*.safetensors")
    data = weights.read_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    weights.write_bytes(data[: header_end + 16])  # the header whole, the tensors cut short
    out = tmp_path / "out" / "tiny-gpt2"
    with pytest.raises(BuildError) as err:
        build_endpoint(endpoint, out, progress=False)
    # The bounded reader sees the offsets past the file's end before the loader runs (facts/model_files.py).
    assert str(err.value).startswith(f"endpoint 'tiny-gpt2': model '{source}': {weights}: tensor ")
    assert "data_offsets is" in str(err.value) and "allowed: offsets within the file's 16 bytes" in str(err.value)
    assert not (tmp_path / "out").exists()
