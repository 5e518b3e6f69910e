"""The stand-in's servers are typed records (local_runtime/stand_in.py DIALECTS), read for their facts, so a new server
the stand-in answers as is one record (that no module branches on a dialect's name is checked with the system names,
tests/systems/test_no_name_branches.py)."""

from __future__ import annotations

import pytest

from local_runtime.stand_in import DIALECTS, Dialect
from systems import all_systems


def test_each_record_is_filed_under_its_own_name():
    assert all(isinstance(d, Dialect) and key == d.name for key, d in DIALECTS.items())


@pytest.mark.parametrize("dialect", DIALECTS.values(), ids=lambda d: d.name)
def test_a_chat_path_the_local_runtime_uses_is_a_route_the_dialect_serves(dialect):
    if dialect.container_chat_path is not None:
        assert dialect.openai_route and dialect.takes_chat, dialect
        assert dialect.container_chat_path == "/v1/chat/completions"


@pytest.mark.parametrize(
    "system", [s for s in all_systems().values() if s.local.kind == "stand-in"], ids=lambda s: s.name
)
def test_every_stand_in_system_gets_its_dialects_flags(system, tmp_path):
    """The container's flags come from the dialect's argv rule, each naming the artifact as the model."""
    dialect = DIALECTS[system.local.dialect]
    argv = dialect.argv({}, tmp_path)
    assert argv[argv.index("--model-path" if "--model-path" in argv else "--model") + 1].startswith(str(tmp_path))
