"""A socketserver in a thread stops in milliseconds: `serve_forever` checks for `shutdown()` every `poll_interval`,
0.5 s by default, so each stop of a server started without one waited half a second (a hub mirror's two servers made
every test that used it wait ~1 s in teardown). Every `Thread(target=<server>.serve_forever)` in the repository gives
a poll_interval; a `serve_forever()` called in a process's own main thread is ended by ending the process."""

from __future__ import annotations

import ast

from helpers import ROOT, repository_python_files


def threads_without_poll_interval(source: str) -> list[int]:
    """Lines of `Thread(target=....serve_forever, ...)` calls that pass no poll_interval in their kwargs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        target = next((k.value for k in node.keywords if k.arg == "target"), None)
        if not (isinstance(target, ast.Attribute) and target.attr == "serve_forever"):
            continue
        kwargs = next((k.value for k in node.keywords if k.arg == "kwargs"), None)
        names = [k.value for k in kwargs.keys if isinstance(k, ast.Constant)] if isinstance(kwargs, ast.Dict) else []
        if "poll_interval" not in names:
            found.append(node.lineno)
    return found


def test_every_server_thread_sets_a_poll_interval():
    slow = {
        f"{path}:{line}"
        for path in repository_python_files()
        if (ROOT / path).is_file()
        for line in threads_without_poll_interval((ROOT / path).read_text())
    }
    assert not slow, f"serve_forever in a thread without a poll_interval (tests/helpers.py serve_in_thread): {slow}"


def test_the_finder_sees_each_form():
    assert threads_without_poll_interval("threading.Thread(target=s.serve_forever, daemon=True).start()") == [1]
    assert threads_without_poll_interval("Thread(target=self.server.serve_forever, kwargs={'x': 1})") == [1]
    assert threads_without_poll_interval("Thread(target=s.serve_forever, kwargs={'poll_interval': 0.02})") == []
    assert threads_without_poll_interval("s.serve_forever()") == []
