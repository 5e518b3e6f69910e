"""The build's check of an artifact against its source (systems/recipe_common.py compare_with_source), on real tiny
models: two greedy runs that part ways at a near tie are accepted as vLLM's model tests accept them
(check_logprobs_close); an artifact with one layer's weights changed is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from artifact import BuildError
from systems import recipe_common as common


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from model_build.tiny_models import make_tiny_model

    return make_tiny_model("gpt2", tmp_path_factory.mktemp("gpt2"))


def _load(path: Path) -> tuple[Any, Any]:
    return common.load_pretrained(path, "fp32")


def _near_tie(model: Any) -> tuple[int, int]:
    """Make every position's final hidden state one fixed vector (ln_f's weight 0, its bias v), so the logits are
    W·v at every step, and give two tokens a <b logits 1.0 and 1.0002: float32 picks b, float16 (whose step near
    1.0 is ~0.001) sees a tie and argmax takes the first, a."""
    import torch

    torch.manual_seed(0)
    hidden = model.config.n_embd
    v = torch.zeros(hidden)
    v[0] = 1.0
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(v)
        w = model.lm_head.weight  # tied to the input embeddings: harmless, the output no longer depends on them
        w[:, 0] = torch.linspace(-0.5, 0.5, w.shape[0])
        a, b = 7, 11
        w[a, 0] = 1.0
        w[b, 0] = 1.0002
    return a, b


def test_greedy_runs_that_part_at_a_near_tie_pass(tiny_gpt2: Path) -> None:
    source, tokenizer = _load(tiny_gpt2)
    a, b = _near_tie(source)
    expected = common.reference_outputs(source, tokenizer)
    artifact = common.reference_outputs(source.half(), tokenizer)  # the same weights, computed in float16
    assert expected[2][0] == b and artifact[2][0] == a, "the premise: the fp32 and fp16 greedy runs part ways"

    check = common.compare_with_source("tie", "fp16", expected, artifact)
    assert check["greedy_tokens_match"] is False and check["max_abs_logit_diff"] <= common.TOLERANCE["fp16"]
    assert check["first_difference"] == {
        "step": 0,
        "source_token": b,
        "artifact_token": a,
        "top_k": common.VERIFY_TOP_K,
        "within_top_k": True,
    }


def test_tokens_that_differ_outside_the_top_k_are_refused(tiny_gpt2: Path) -> None:
    import torch

    source, tokenizer = _load(tiny_gpt2)
    expected = common.reference_outputs(source, tokenizer)
    logits, prompt_ids, tokens, steps = expected
    # the same logits, but a first step whose token the source ranks last
    other = list(tokens)
    other[0] = int(torch.argmin(steps[0]))
    with pytest.raises(BuildError, match=r"first differ at step 0: .*each among the other's top 5: False"):
        common.compare_with_source("odd", "fp32", expected, (logits, prompt_ids, other, steps))


def test_an_artifact_with_one_layer_changed_is_refused(tiny_gpt2: Path) -> None:
    import torch

    source, tokenizer = _load(tiny_gpt2)
    expected = common.reference_outputs(source, tokenizer)
    changed, _ = _load(tiny_gpt2)
    with torch.no_grad():
        weight = changed.transformer.h[0].mlp.c_fc.weight
        weight.add_(torch.randn(weight.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    artifact = common.reference_outputs(changed, tokenizer)
    with pytest.raises(BuildError, match=r"endpoint 'changed': .*max abs logit diff .* \(allowed <= 0\.01\)"):
        common.compare_with_source("changed", "fp16", expected, artifact)


def test_the_same_weights_pass_with_identical_tokens(tiny_gpt2: Path) -> None:
    source, tokenizer = _load(tiny_gpt2)
    again, _ = _load(tiny_gpt2)
    check = common.compare_with_source(
        "same", "fp32", common.reference_outputs(source, tokenizer), common.reference_outputs(again, tokenizer)
    )
    assert check["greedy_tokens_match"] is True and check["first_difference"] is None
    assert check["max_abs_logit_diff"] == 0.0
