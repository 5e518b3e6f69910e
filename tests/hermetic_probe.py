"""What tests/test_hermetic.py runs in a child pytest started from a hostile shell (not collected by itself: the
file name does not start with test_). Each check reads what a test of the suite would see."""

from __future__ import annotations

import os
import subprocess

import boto3
import pytest
from hermetic import subprocess_env

import request_contract

HOSTILE_NAMES = ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL")


def test_the_shells_aws_settings_do_not_reach_a_test():
    assert not [n for n in HOSTILE_NAMES if n in os.environ]
    session = boto3.Session()
    assert session.region_name is None and session.get_credentials() is None  # no profile, no keys, no metadata


def test_the_shells_endpoint_limits_do_not_reach_a_test():
    limits = request_contract.limits()
    assert limits.max_input_chars == request_contract.DEFAULT_MAX_INPUT_CHARS
    assert limits.max_new_tokens == request_contract.DEFAULT_MAX_NEW_TOKENS_CAP


def test_the_hub_is_offline():
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE


def test_a_tests_own_patch_does_not_reach_a_subprocess(monkeypatch):
    monkeypatch.setenv("MAX_INPUT_CHARS", "40")
    env = subprocess_env()
    assert "MAX_INPUT_CHARS" not in env
    out = subprocess.run(["env"], env=env, capture_output=True, text=True, check=True).stdout
    assert "MAX_INPUT_CHARS" not in out and "AWS_PROFILE" not in out


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_connection_beyond_loopback_is_refused():
    import socket

    from pytest_socket import SocketConnectBlockedError

    # 127.0.0.2 is loopback but not in pytest.ini's --allow-hosts: refused before any packet is sent (and, were the
    # guard missing, the connection would stay on this machine).
    with socket.socket() as s, pytest.raises(SocketConnectBlockedError):
        s.connect(("127.0.0.2", 9))
