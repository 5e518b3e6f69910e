"""One meaning per word, where a reader meets it most: "spec" is a block of the config file as parsed (a class named
*Spec in endpoint_config/), and "deployment" is the package that loads and plans a config, or the config's own
`deployment:` key (SageMaker's DeploymentConfig: the update policy, read as UpdatePolicySpec).

Every annotated parameter or field named `spec` or `*_spec` in our code must hold a *Spec, and every class named
*Spec must be a config block; no class is called Deployment* any more (the resolved environment is EnvironmentPlan)."""

from __future__ import annotations

import ast
import subprocess

from helpers import ROOT


def _sources() -> list[tuple[str, ast.Module]]:
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [(f, ast.parse((ROOT / f).read_text(), f)) for f in files if not f.startswith("tests/")]


def _annotation_name(node: ast.expr | None) -> str:
    """The last dotted name an annotation names, `X | None` and `Optional[X]` reduced to X."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.parse(node.value, mode="eval").body
    if isinstance(node, ast.BinOp):
        return _annotation_name(node.left) or _annotation_name(node.right)
    if isinstance(node, ast.Subscript):
        return _annotation_name(node.slice)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def misnamed_specs(tree: ast.Module, path: str) -> list[str]:
    wrong = []
    for node in ast.walk(tree):
        named: list[tuple[str, ast.expr | None, int]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            named = [(a.arg, a.annotation, a.lineno) for a in args if a.annotation is not None]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            named = [(node.target.id, node.annotation, node.lineno)]
        for name, annotation, line in named:
            if (name == "spec" or name.endswith("_spec")) and not _annotation_name(annotation).endswith("Spec"):
                wrong.append(f"{path}:{line}: {name} holds {ast.unparse(annotation) if annotation else '?'}")
        if isinstance(node, ast.ClassDef):
            if node.name.endswith("Spec") and not path.startswith("endpoint_config/"):
                wrong.append(f"{path}:{node.lineno}: class {node.name} is named like a config block")
            if node.name.startswith("Deployment"):
                wrong.append(f"{path}:{node.lineno}: class {node.name}: 'deployment' names the package and the key")
    return wrong


def test_spec_means_a_config_block_and_deployment_the_package_or_the_key():
    wrong = [w for path, tree in _sources() for w in misnamed_specs(tree, path)]
    assert wrong == [], "\n".join(wrong)


def test_the_name_check_finds_each_kind_of_slip():
    tree = ast.parse(
        "def f(spec: Parameter, pool_spec: EndpointSpec, ok_spec: 'AlarmsSpec | None'): ...\n"
        "class Deployment: ...\nclass WorkloadSpec: ...\nx_spec: dict = {}\n"
    )
    assert [w.split(": ", 1)[1] for w in misnamed_specs(tree, "stacks/x.py")] == [
        "spec holds Parameter",
        "class Deployment: 'deployment' names the package and the key",
        "class WorkloadSpec is named like a config block",
        "x_spec holds dict",
    ]
