"""Which resources a CloudFormation update of a stack replaces: the deployed template against the synthesized one,
property by property, by each resource type's createOnlyProperties (operations review R2).

A change to a create-only property replaces the resource; a Ref or GetAtt of a replaced resource changes the value
that names it, so what refers to it changes too. The create-only lists come from cfn-lint's registry schemas
(CREATE_ONLY_FILE, written by `python -m model_build.replacement --write` from the cfn-lint pinned in
requirements-dev.txt; tests/model_build/test_replacement.py fails when a resource type of any synthesized template, or
a property of one, differs from the venv's schema). The deploy set has no cfn-lint, hence the snapshot.

A type without a schema (Custom::*, AWS::CloudFormation::CustomResource) counts as replaced when any of its properties
changes, and its attributes (GetAtt) as changed when it is updated at all: its handler decides both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CREATE_ONLY_FILE = Path(__file__).with_name("create_only_properties.json")
REGION_OF_SCHEMAS = "us-east-1"  # cfn-lint's schemas per region agree on createOnlyProperties for these types


@cache
def create_only() -> dict[str, list[str]]:
    """type -> its createOnlyProperties (JSON pointers under /properties)."""
    return json.loads(CREATE_ONLY_FILE.read_text())["types"]


def from_cfn_lint(types: set[str]) -> dict[str, list[str]]:
    """The createOnlyProperties of `types` in the venv's cfn-lint schemas (types without a schema are left out)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER  # type: ignore[import-untyped]  # cfn-lint ships no py.typed

    found = {}
    for kind in sorted(types):
        try:
            schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION_OF_SCHEMAS, kind)
        except Exception:  # no schema: a custom resource type
            continue
        found[kind] = sorted(schema.schema.get("createOnlyProperties", []))
    return found


def _at(props: dict[str, Any], pointer: str) -> Any:
    """The value at a JSON pointer such as /properties/VpcConfig/Subnets (None when absent)."""
    value: Any = props
    for part in pointer.split("/")[2:]:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _references(value: Any) -> list[tuple[str, str | None]]:
    """Every (logical id, attribute or None for Ref) a template value refers to."""
    found: list[tuple[str, str | None]] = []
    if isinstance(value, dict):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            found.append((value["Ref"], None))
        elif set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            target = target.split(".", 1) if isinstance(target, str) else target
            found.append((target[0], str(target[1]) if len(target) > 1 else None))
        else:
            for v in value.values():
                found += _references(v)
    elif isinstance(value, list):
        for v in value:
            found += _references(v)
    return found


@dataclass
class Replacement:
    """Why CloudFormation would replace one resource: each create-only property that changes, as 'path: old -> new'
    (or the replaced resource the value names)."""

    logical_id: str
    changes: list[str]


class TemplateDiff:
    """The deployed template (`old`) against the one about to be deployed (`new`)."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any], create_only_of: dict[str, list[str]] | None = None):
        self.old = old.get("Resources", {})
        self.new = new.get("Resources", {})
        self.create_only_of = create_only() if create_only_of is None else create_only_of
        self._replaced: dict[str, list[str]] = {}

    def replaced(self, logical_id: str) -> list[str]:
        """Why the resource is replaced (empty: it is not; a resource the old template lacks is 'created')."""
        if logical_id not in self._replaced:
            self._replaced[logical_id] = []  # no reference cycles in a template; this only ends a malformed one
            self._replaced[logical_id] = self._why(logical_id)
        return self._replaced[logical_id]

    def _why(self, logical_id: str) -> list[str]:
        new, old = self.new.get(logical_id), self.old.get(logical_id)
        if new is None:
            return []
        if old is None:
            return ["created by this deploy"]
        if old["Type"] != new["Type"]:
            return [f"type {old['Type']} -> {new['Type']}"]
        old_props, new_props = old.get("Properties", {}), new.get("Properties", {})
        pointers = self.create_only_of.get(new["Type"])
        if pointers is None:  # no schema: its handler decides; any change may replace it
            pointers = [f"/properties/{key}" for key in sorted(set(old_props) | set(new_props))]
        changes = []
        for pointer in pointers:
            was, now = _at(old_props, pointer), _at(new_props, pointer)
            name = pointer.removeprefix("/properties/")
            if was != now:
                changes += [f"{path}: {_short(a)} -> {_short(b)}" for path, a, b in _leaf_differences(name, was, now)]
                continue
            why = self._differs(was, now)
            if why:
                changes.append(f"{name}: {why}")
        return changes

    def updated(self, logical_id: str) -> bool:
        new, old = self.new.get(logical_id), self.old.get(logical_id)
        return new is None or old is None or old.get("Properties") != new.get("Properties")

    def _differs(self, was: Any, now: Any) -> str | None:
        """Why the value CloudFormation resolves changes ('old -> new', or the replaced resource it names), or None."""
        if was != now:
            return f"{_short(was)} -> {_short(now)}"
        for target, attribute in _references(now):
            if target not in self.new:
                continue  # a parameter or pseudo parameter: the same value
            if self.replaced(target):
                return f"names {target}, which this deploy replaces ({'; '.join(self.replaced(target))})"
            custom = self.new[target]["Type"] not in self.create_only_of
            if custom and attribute is not None and self.updated(target):
                return f"names {target}.{attribute}, which this deploy's update of {target} may change"
        return None

    def replacements(self, resource_type: str) -> list[Replacement]:
        """Every resource of `resource_type` in the new template that the update replaces."""
        return [
            Replacement(lid, self.replaced(lid))
            for lid, resource in sorted(self.new.items())
            if resource["Type"] == resource_type and self.replaced(lid)
        ]


def _leaf_differences(path: str, was: Any, now: Any, limit: int = 4) -> list[tuple[str, Any, Any]]:
    """The innermost (path, old, new) where two values differ, at most `limit` (a long list would drown the rest)."""
    if was == now:
        return []
    if isinstance(was, dict) and isinstance(now, dict) and not (_intrinsic(was) or _intrinsic(now)):
        found = []
        for key in sorted(set(was) | set(now)):
            found += _leaf_differences(f"{path}/{key}", was.get(key), now.get(key), limit)
        return found[:limit]
    if isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        found = []
        for i, (a, b) in enumerate(zip(was, now, strict=True)):
            found += _leaf_differences(f"{path}/{i}", a, b, limit)
        return found[:limit]
    return [(path, was, now)]


def _intrinsic(value: dict[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::"))


def _short(value: Any) -> str:
    text = "absent" if value is None else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def stack_templates(assembly: Path) -> dict[str, Path]:
    """stack name -> template file of every stack in a cloud assembly (nested stage assemblies included)."""
    found: dict[str, Path] = {}
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        props = artifact.get("properties", {})
        if artifact.get("type") == "aws:cloudformation:stack":
            found[props.get("stackName", artifact_id)] = assembly / props["templateFile"]
        elif artifact.get("type") == "cdk:cloud-assembly":
            found.update(stack_templates(assembly / props["directoryName"]))
    return found


def write_snapshot(types: set[str]) -> None:
    CREATE_ONLY_FILE.write_text(
        json.dumps(
            {
                "source": "cfn-lint registry schemas (createOnlyProperties), cfnlint.schema.PROVIDER_SCHEMA_MANAGER, "
                f"region {REGION_OF_SCHEMAS}; written by python -m model_build.replacement --write",
                "types": from_cfn_lint(types),
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )


__all__ = ["CREATE_ONLY_FILE", "Replacement", "TemplateDiff", "create_only", "from_cfn_lint", "stack_templates"]


def main(argv: list[str] | None = None) -> int:
    """`python -m model_build.replacement --write TEMPLATE...`: the snapshot for every resource type of the given
    templates (and those it holds already), from the venv's cfn-lint."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m model_build.replacement")
    parser.add_argument("--write", nargs="+", metavar="TEMPLATE", required=True, type=Path)
    args = parser.parse_args(argv)
    types = set(create_only()) if CREATE_ONLY_FILE.is_file() else set()
    for path in args.write:
        types |= {r["Type"] for r in json.loads(path.read_text()).get("Resources", {}).values()}
    write_snapshot(types)
    print(f"wrote {CREATE_ONLY_FILE} ({len(from_cfn_lint(types))} resource types)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
