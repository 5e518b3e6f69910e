"""bodies.EndpointBody: how one endpoint's container takes a prompt (its body kind, reasoning field and unread
parameters) travels as one value, from the plan to every workstation client and, through the environment the stack
renders, to the functions."""

from __future__ import annotations

import pytest
from helpers import EXAMPLE_CASES, ROOT

import request_contract
from deployment import load_config
from endpoint_runtime import bodies


@pytest.mark.parametrize(("path", "env"), EXAMPLE_CASES)
def test_the_functions_read_back_the_body_every_workstation_client_uses(path, env, tmp_path):
    """What the stack renders for the functions is read back as the plan's own EndpointBody, for every example:
    the functions and the workstation clients (demo, smoke test, SLO gate) cannot disagree on one of the facts."""
    for plan in load_config(ROOT / path, env, build_root=tmp_path).plans:
        body = plan.endpoint_body
        facet = plan.system.bodies
        assert (body.kind, body.reasoning_field, body.unread_parameters) == (
            facet.prompt_kind,
            facet.reasoning_field,
            facet.unread_parameters,
        )
        assert bodies.EndpointBody.from_env(plan.front_door_environment) == body
        assert plan.smoke.body == body


def test_unset_variables_are_the_generation_body_that_reads_everything():
    body = bodies.EndpointBody.from_env({})
    assert body == bodies.EndpointBody() and body.environment() == {"PROMPT_BODY": "generation"}
    assert body.reads("min_new_tokens") and body.reads("num_beams")


def test_a_kind_or_parameter_outside_the_lists_is_refused_naming_it():
    with pytest.raises(request_contract.SetupError, match="body kind 'openai-embeddings' is not one of generation"):
        bodies.EndpointBody("openai-embeddings")
    with pytest.raises(request_contract.SetupError, match=r"unread parameters \['top_p'\]: allowed: min_new_tokens"):
        bodies.EndpointBody(unread_parameters=frozenset({"top_p"}))
    with pytest.raises(request_contract.SetupError, match="PROMPT_BODY must be one of"):
        bodies.EndpointBody.from_env({"PROMPT_BODY": "chat"})


def test_an_unread_parameter_is_refused_in_the_body_and_its_no_op_left_out():
    tgi_like = bodies.EndpointBody(unread_parameters=frozenset({"min_new_tokens", "num_beams"}))
    assert not tgi_like.reads("min_new_tokens")
    with pytest.raises(request_contract.RequestError, match="parameters.min_new_tokens: value 8 is not served"):
        tgi_like.request({"inputs": "a", "parameters": {"min_new_tokens": 8}})
    sent = tgi_like.request({"inputs": "a", "parameters": {"min_new_tokens": 0, "num_beams": 1, "max_new_tokens": 4}})
    assert sent["parameters"] == {"return_full_text": False, "max_new_tokens": 4}
    # the same request to a container that reads them carries them
    assert bodies.EndpointBody().request({"inputs": "a", "parameters": {"min_new_tokens": 8}})["parameters"] == {
        "return_full_text": False,
        "min_new_tokens": 8,
    }
