"""Read a config file's YAML within bounds: UTF-8, a size cap, YAML 1.2 core scalars, no duplicate keys, aliases
whose expansion is counted and capped, and the line of every key for error messages (README, "How the file is read").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

# Why the bounds: a 779-byte file of nested aliases expands to gigabytes once something walks it (validation, a repr
# for a message), and PyYAML's composer recurses once per nesting level. Aliases stay allowed (repeating a block, the
# same alarms on every endpoint, is their use here), but the tree they and merge keys expand to is counted on the
# composed nodes, before any Python object is built. YAML 1.2's core schema (https://yaml.org/spec/1.2.2/, 10.3.2)
# instead of PyYAML's YAML 1.1: only true/false are booleans (1.1: yes/no/on/off), no sexagesimal (1.1: 1:30 is 90) or
# leading-zero octal (1.1: 010 is 8) numbers, no implicit dates. Duplicate keys: YAML requires unique keys; PyYAML
# keeps the last silently.
# production.yaml, the largest example, is 6 KB with 212 nodes: the caps leave room for 20x its bytes and 200x its
# nodes, and keep reading a hostile file near a second (the pure-Python parser reads ~100 KB/s on a shared 2-core
# machine).
MAX_FILE_BYTES = 128 * 1024
MAX_NODES = 50_000
MAX_DEPTH = 40

MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlReadError(Exception):
    """The file cannot be read as a config. The message names the line (and column) and what is allowed; the caller
    adds the file's path."""


@dataclass(frozen=True)
class YamlDocument:
    """The file's data, and the 1-based line of each key or list item by its path (("endpoints", 0, "name"), ...)."""

    data: Any
    lines: dict[tuple[Any, ...], int]

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        """The line of the longest prefix of `loc` (a pydantic error location) that names a key in the file."""
        for end in range(len(loc), 0, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return None


class _Core12Resolver(BaseResolver):
    """The YAML 1.2 core schema's tag resolution for plain scalars (spec 1.2.2, section 10.3.2), plus the merge key."""


for _tag, _pattern, _first in (
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        "float",
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("merge", r"<<", "<"),
):
    _Core12Resolver.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(rf"^(?:{_pattern})$"), list(_first))


class _Core12Constructor(SafeConstructor):
    """Integers and floats as the 1.2 core schema writes them (PyYAML's own constructors read 1.1 forms)."""

    def construct_yaml_int(self, node: ScalarNode) -> int:
        value = self.construct_scalar(node)
        base, digits = {"0o": (8, value[2:]), "0x": (16, value[2:])}.get(value[:2], (10, value))
        try:
            return int(digits, base)
        except ValueError:  # Python refuses to convert more than sys.get_int_max_str_digits() digits
            raise ConstructorError(
                None, None, f"an integer of {len(digits)} digits is out of any range here", node.start_mark
            ) from None

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = self.construct_scalar(node).lower()
        if value.lstrip("+-") == ".inf":
            return -math.inf if value.startswith("-") else math.inf
        if value == ".nan":
            return math.nan
        return float(value)


# type-var: types-PyYAML bounds a constructor's first argument to PyYAML's own Loader classes, not to the constructor
# class it is registered on (PyYAML calls it with any loader built on that class, as _BoundedLoader is).
_Core12Constructor.add_constructor("tag:yaml.org,2002:int", _Core12Constructor.construct_yaml_int)  # type: ignore[type-var]
_Core12Constructor.add_constructor("tag:yaml.org,2002:float", _Core12Constructor.construct_yaml_float)  # type: ignore[type-var]


class _BoundedLoader(Reader, Scanner, Parser, Composer, _Core12Constructor, _Core12Resolver):
    """PyYAML's pure-Python safe loader with the bounds above (the C loader composes in C, where depth cannot be
    guarded)."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _Core12Constructor.__init__(self)
        _Core12Resolver.__init__(self)
        self._depth = 0
        self.lines: dict[tuple[Any, ...], int] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YamlReadError(
                    f"line {mark.line + 1}, column {mark.column + 1}: the data nests deeper than {MAX_DEPTH} levels; "
                    "a config nests a few levels (environments, endpoints, blocks)"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            _Inspection(self).run(node)
        return node


class _Inspection:
    """One pass over the composed nodes, each distinct node once: the expanded size and depth (what aliases and merge
    keys grow to), alias cycles, duplicate keys, and the line of each key by path (first path only through aliases)."""

    def __init__(self, loader: _BoundedLoader) -> None:
        self.loader = loader
        self.size: dict[int, int] = {}
        self.depth: dict[int, int] = {}
        self.open: set[int] = set()

    def run(self, root: Node) -> None:
        _, deepest = self.visit(root, ())
        if deepest > MAX_DEPTH:
            raise YamlReadError(
                f"the data nests {deepest} levels deep once its aliases are expanded; allowed: {MAX_DEPTH}"
            )

    def visit(self, node: Node, path: tuple[Any, ...]) -> tuple[int, int]:
        key = id(node)
        if key in self.size:
            return self.size[key], self.depth[key]
        if key in self.open:
            mark = node.start_mark
            raise YamlReadError(
                f"line {mark.line + 1}: an alias refers to the node that contains it (a cycle); aliases may only "
                "repeat a node defined before and outside them"
            )
        self.open.add(key)
        size, deepest = 1, 0
        for child, child_path in self.children(node, path):
            child_size, child_depth = self.visit(child, child_path)
            size += child_size
            deepest = max(deepest, child_depth)
            if size > MAX_NODES:
                mark = node.start_mark
                raise YamlReadError(
                    f"line {mark.line + 1}: the data grows past {MAX_NODES} values once its aliases (*name) and merge "
                    f"keys (<<) are expanded; allowed: at most {MAX_NODES} (a config has a few hundred to a few "
                    "thousand): repeat fewer blocks by alias"
                )
        self.open.discard(key)
        self.size[key], self.depth[key] = size, deepest + 1
        return size, deepest + 1

    def children(self, node: Node, path: tuple[Any, ...]) -> list[tuple[Node, tuple[Any, ...]]]:
        if isinstance(node, SequenceNode):
            items: list[tuple[Node, tuple[Any, ...]]] = []
            for index, item in enumerate(node.value):
                self.loader.lines.setdefault((*path, index), item.start_mark.line + 1)
                items.append((item, (*path, index)))
            return items
        if not isinstance(node, MappingNode):
            return []
        out: list[tuple[Node, tuple[Any, ...]]] = []
        seen: dict[Any, int] = {}  # key -> its line
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                out.append((value_node, path))
                continue
            key = self.key_of(key_node)
            if key is not None:
                if key in seen:
                    first, mark = seen[key], key_node.start_mark
                    raise YamlReadError(
                        f"line {mark.line + 1}, column {mark.column + 1}: key {_shown(key)} is given twice in one "
                        f"mapping (lines {first} and {mark.line + 1}); each key may appear once: remove one"
                    )
                seen[key] = key_node.start_mark.line + 1
                self.loader.lines.setdefault((*path, key), key_node.start_mark.line + 1)
            out += [(key_node, path), (value_node, (*path, key))]
        return out

    def key_of(self, key_node: Node) -> Any:
        """A scalar key's value as the constructor builds it (so `1` and `"1"` differ, `true` and `True` do not);
        None for a collection as a key (the constructor refuses it as unhashable)."""
        if not isinstance(key_node, ScalarNode):
            return None
        return self.loader.construct_object(key_node)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _decode(data: bytes) -> str:
    """The file's bytes as text: UTF-8 (a byte order mark is dropped); anything else names the first bad byte."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise YamlReadError("the file is UTF-16 (it starts with a UTF-16 byte order mark); allowed: UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        start = data.rfind(b"\n", 0, err.start) + 1
        end = data.find(b"\n", err.start)
        text = data[start : end if end != -1 else len(data)].decode("utf-8", errors="replace").strip()
        raise YamlReadError(
            f"line {line}, column {column}: byte 0x{data[err.start]:02x} is not UTF-8 (the line reads {_shown(text)}); allowed: "
            "UTF-8 text: save the file as UTF-8"
        ) from None


def _yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """PyYAML's error as "line L, column C: what" without its own multi-line rendering."""
    if isinstance(err, yaml.reader.ReaderError):  # for text input: `character` is the code point
        line = text.count("\n", 0, err.position) + 1
        column = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        return (
            f"line {line}, column {column}: character U+{err.character:04X} is not allowed in YAML; allowed: "
            "printable characters, tabs and line breaks"
        )
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err)
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        context += f" that starts at line {context_mark.line + 1}, column {context_mark.column + 1}"
    return f"{at}not valid YAML: {problem}" + (f" ({context})" if context else "")


def read_yaml(path: Path) -> YamlDocument:
    """Read `path` as one YAML document within the bounds; YamlReadError says why not (without the path)."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise YamlReadError(f"cannot be read: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise YamlReadError(
            f"the file is larger than {MAX_FILE_BYTES // 1024} KiB; allowed: at most {MAX_FILE_BYTES // 1024} KiB "
            "(a config is a few KB)"
        )
    return parse_yaml(_decode(data))


def parse_yaml(text: str) -> YamlDocument:
    """One YAML document from text, within the bounds."""
    try:
        loader = _BoundedLoader(text)  # the reader refuses non-printable characters here
        try:
            return YamlDocument(loader.get_single_data(), loader.lines)
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        raise YamlReadError(_yaml_problem(err, text)) from None


__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "YamlDocument", "YamlReadError", "parse_yaml", "read_yaml"]
