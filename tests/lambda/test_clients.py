"""endpoint_runtime/clients.py: the one boto3 client cache of invoke, stream, async_invoke and artifact_check."""

from __future__ import annotations

from endpoint_runtime import clients, invoke, stream


def test_a_client_is_made_once_per_key_and_forgotten_by_prefix(monkeypatch):
    monkeypatch.setattr(clients, "_clients", {})
    made: list[str] = []

    def make(name: str):
        return lambda: made.append(name) or object()

    first = clients.cached("a:x", make("a:x"))
    assert clients.cached("a:x", make("a:x")) is first and made == ["a:x"]
    other = clients.cached("b:x", make("b:x"))
    clients.forget("a:")
    assert clients.cached("a:x", make("a:x")) is not first
    assert clients.cached("b:x", make("b:x")) is other and made == ["a:x", "b:x", "a:x"]


def test_a_client_set_on_the_module_wins_and_reset_forgets_the_cached_one(monkeypatch):
    monkeypatch.setattr(clients, "_clients", {})
    for module, key in ((invoke, "invoke:sagemaker-runtime"), (stream, "stream:sagemaker-runtime")):
        cached, mine = object(), object()
        clients.cached(key, lambda c=cached: c)
        assert module.get_client() is cached
        monkeypatch.setattr(module, "_client", mine)
        assert module.get_client() is mine
        module.reset_client()
        assert module._client is None and key not in clients._clients
