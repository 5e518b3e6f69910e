"""The hf-fastload handler's load path: weight init skipped where transformers 5 would run it on the meta device, and
a checkpoint missing a weight still loads as transformers loads it (nothing left uninitialized)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from systems.hf_fastload.handler import inference as handler


def test_load_runs_no_weight_init_and_gives_the_checkpoint(gpt2_artifact: Path, monkeypatch) -> None:
    calls = []
    original = torch.nn.init.normal_

    def counting_normal_(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.nn.init, "normal_", counting_normal_)
    bundle = handler.load_model(gpt2_artifact)
    monkeypatch.undo()
    assert calls == []  # GPT-2's Conv1D inits with normal_: skipped, the checkpoint overwrites it anyway
    stored = {}
    for shard in sorted(gpt2_artifact.glob("*.safetensors")):
        stored.update(load_file(shard))
    params = dict(bundle["model"].named_parameters())
    assert stored.keys() <= params.keys() | {"lm_head.weight"}
    for name, tensor in stored.items():
        assert torch.equal(params[name].detach(), tensor.to(params[name].dtype)), name
    model = bundle["model"]
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied


def _without_ln_f_weight(gpt2_artifact: Path, tmp_path: Path) -> Path:
    broken = tmp_path / "missing-ln_f"
    shutil.copytree(gpt2_artifact, broken)
    (broken / "manifest.json").unlink()  # a plain transformers directory: the handler reads it all the same
    for shard in sorted(broken.glob("*.safetensors")):
        tensors = load_file(shard)
        if "transformer.ln_f.weight" in tensors:
            del tensors["transformer.ln_f.weight"]
            save_file(tensors, shard, metadata={"format": "pt"})
    index = broken / "model.safetensors.index.json"
    if index.is_file():
        import json

        data = json.loads(index.read_text())
        data["weight_map"].pop("transformer.ln_f.weight", None)
        index.write_text(json.dumps(data))
    return broken


@pytest.mark.parametrize("init", ["transformers", "torch.nn.init"])
def test_a_missing_weight_is_initialized_as_transformers_does(
    gpt2_artifact: Path, tmp_path: Path, monkeypatch, init: str
) -> None:
    """Without its final layer norm's weight the model is initialized as transformers initializes it (LayerNorm:
    ones), also for a model class whose `_init_weights` calls torch.nn.init directly (as remote code may): the
    skip covers only the init at construction, not transformers' init of missing weights."""
    broken = _without_ln_f_weight(gpt2_artifact, tmp_path)
    if init == "torch.nn.init":

        def direct_init(self, module):
            if isinstance(module, torch.nn.LayerNorm):
                torch.nn.init.ones_(module.weight)  # looked up at call time: a no-op inside no_init_weights
                torch.nn.init.zeros_(module.bias)

        monkeypatch.setattr(transformers.GPT2PreTrainedModel, "_init_weights", direct_init)
    bundle = handler.load_model(broken, dtype=torch.float32)
    reference = transformers.AutoModelForCausalLM.from_pretrained(broken, dtype=torch.float32)
    got = bundle["model"].transformer.ln_f.weight.detach()
    assert torch.equal(got, reference.transformer.ln_f.weight.detach())
    assert torch.equal(got, torch.ones_like(got))
