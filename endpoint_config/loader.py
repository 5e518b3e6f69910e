"""Read a config file, validate it against the schema and apply one environment's overrides.

The serving systems' rules and the per-endpoint plans are deployment's (`deployment.load_config`).
"""

from __future__ import annotations

import difflib
import functools
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from .chat import openai_caller_problems
from .schema import AppConfig, EndpointOverride, EndpointSpec, EnvironmentSpec, endpoint_problems
from .security import arn_region_problems, config_arns
from .slo import slo_region_problems
from .yaml_reader import YamlDocument, YamlReadError, read_yaml

# A config with only `endpoints:` deploys to this implicit environment, with the CLI's account and region.
DEFAULT_ENVIRONMENT = "default"


class ConfigError(Exception):
    """The config file is wrong. The message says where, what and what is allowed; print it, no traceback."""


@dataclass(frozen=True)
class ResolvedEnvironment:
    """One environment of a config file with its overrides applied and the schema's rules run. `problems`: every
    schema problem (deployment adds the serving systems' and raises them together); `checked`: the endpoints whose
    schema rules passed, on which the systems' rules run."""

    config: AppConfig
    path: Path
    name: str
    spec: EnvironmentSpec
    endpoints: tuple[EndpointSpec, ...]
    checked: tuple[EndpointSpec, ...]
    problems: tuple[str, ...]

    def where(self, ep: EndpointSpec) -> str:
        """The prefix of a problem of `ep` in this environment ("environment 'x': " when an override applies)."""
        return f"environment {self.name!r}: " if self.spec.overrides.get(ep.name) else ""


def _where(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """Turn a pydantic error location into words a user can find in their file."""
    parts: list[str] = []
    i = 0
    while i < len(loc):
        key = loc[i]
        if key == "endpoints" and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            idx = loc[i + 1]
            try:
                name = raw["endpoints"][idx].get("name")
            except (KeyError, IndexError, TypeError, AttributeError):
                name = None
            parts.append(f"endpoint {name!r}" if name else f"endpoints[{idx}]")
            i += 2
            continue
        if key == "environments" and i + 1 < len(loc):
            parts.append(f"environment {loc[i + 1]!r}")
            i += 2
            continue
        parts.append(str(key))
        i += 1
    head = [p for p in parts if p.startswith(("endpoint", "environment"))]
    keys = [p for p in parts if p not in head]
    return ": ".join(head + ([".".join(keys)] if keys else []))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config block a field holds: its annotation's model, inside `X | None`, lists, tuples and dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg)) is not None), None)


def _allowed_keys(loc: tuple[Any, ...], root: type[BaseModel] = AppConfig) -> list[str]:
    """The keys allowed where an unknown key `loc[-1]` was found, walking the models along `loc` from `root`."""
    model: type[BaseModel] | None = root
    for key in loc[:-1]:
        if model is None:
            break
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is not None:  # else a list index or a mapping's key (an environment's or an endpoint's name)
            model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def nested_unknown_key(root: type[BaseModel], loc: tuple[Any, ...], where: str) -> str:
    """ "<where>: unknown key (did you mean ...?); allowed keys: ..." for an unknown key at `loc` inside `root` (a
    block validated on its own, such as a system's engine options)."""
    allowed = _allowed_keys(loc, root)
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{where}: unknown key{hint}; allowed keys: {', '.join(allowed) or 'none'}"


@functools.cache
def _model_names() -> frozenset[str]:
    """The names of the config's models: pydantic puts them in an error's location as the union branch it tried."""
    names, todo = set(), [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__name__ not in names:
                names.add(sub.__name__)
                todo.append(sub)
    return frozenset(names)


def _branch_errors(errors: list[Any]) -> list[Any]:
    """A value that matches no branch of a union (`chat: ChatSpec | false | null`) gets one error per branch, each
    located under the branch's tag: keep those of the mapping branch when the value is a mapping (a misspelt key is
    about the block, not about `false`), and drop the tags from the locations."""

    def is_tag(part: Any) -> bool:
        return isinstance(part, str) and (part in _model_names() or part.startswith(("literal[", "function-")))

    kept = []
    for e in errors:
        loc = tuple(e["loc"])
        tags = [i for i, part in enumerate(loc) if is_tag(part)]
        if tags and isinstance(loc[tags[0]], str) and loc[tags[0]].startswith("literal["):
            prefix = loc[: tags[0]]
            if any(tuple(o["loc"])[: len(prefix)] == prefix and o is not e for o in errors):
                continue  # another branch of the same union says more
        kept.append({**e, "loc": tuple(part for i, part in enumerate(loc) if i not in tags)})
    return kept


def _format_validation_error(err: ValidationError, raw: dict[str, Any], document: YamlDocument | None) -> list[str]:
    lines = []
    for e in _branch_errors(err.errors()):
        loc = tuple(e["loc"])
        where = _where(loc, raw)
        line = document.line_of(loc) if document is not None and loc else None
        at = f" (line {line})" if line is not None else ""
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc)
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            lines.append(f"{where}: unknown key{hint}; allowed keys: {', '.join(allowed)}{at}")
            continue
        text = describe_error(e)
        if e["type"] == "string_pattern_mismatch" and loc[-1] == "name":
            text = f"value {shown_value(e.get('input'))}: use 1-40 characters of a-z, 0-9 and '-', starting and ending with a letter or digit"
        lines.append((f"{where}: {text}" if where else text) + at)
    return lines


# What a value of the wrong kind should have been (pydantic's strict-mode error types).
_KIND_HINTS = {
    "bool_type": "allowed: true or false",
    "int_type": "allowed: a whole number, written without quotes",
    "float_type": "allowed: a number, written without quotes",
    "finite_number": "allowed: a finite number (not .inf or .nan)",
    "string_type": "allowed: text",
    "dict_type": "allowed: a mapping of keys",
    "model_type": "allowed: a mapping of keys",
    "list_type": "allowed: a list",
    "tuple_type": "allowed: a list",
}


# What a pattern refusal allows, in words (the regex itself says little to a reader): by the pattern's text.
_PATTERN_WORDS = {
    r"^[0-9]{12}$": "allowed: 12 digits 0-9, in quotes (an AWS account id)",
    r"^[a-z]{2}(?:-[a-z]+)+-[0-9]$": "allowed: a region name such as us-east-1 or eu-west-2",
    r"^[0-9a-f]{64}$": "allowed: 64 lowercase hex digits (the content hash `python -m model_build build` prints)",
    r"^[0-9]+(?:\.[0-9]+)?(?:KB|MB|GB)$": "allowed: a size such as 500MB or 2GB (KB, MB, GB)",
    r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$": "allowed: owner/name of ASCII letters, digits, '_', '.', '-'",
}


def describe_error(e: Any) -> str:
    """One pydantic error as "value <value>: <message>" (or just the message for a missing key or a model rule)."""
    value = e.get("input")
    # A model validator's `input` is the whole model as a dict: for the file-wide rules (duplicate names, overrides
    # and pipeline stages naming what is not defined) the entire config. Its message names the values itself, so
    # print the message only.
    model_rule = isinstance(value, dict) and e["type"] in ("value_error", "assertion_error")
    if e["type"] == "missing":
        return "required key is missing"
    shown = "" if model_rule else f"value {shown_value(value)}: "
    hint = _KIND_HINTS.get(e["type"])
    if e["type"] == "string_pattern_mismatch":
        hint = _PATTERN_WORDS.get((e.get("ctx") or {}).get("pattern", ""))
    if e["type"] == "string_type" and isinstance(value, (bool, int, float)):
        # YAML read it as a boolean or number: quotes keep it text.
        kind = "a boolean" if isinstance(value, bool) else "a number"
        hint = f"{hint}: write it in quotes (YAML reads an unquoted {shown_value(value)} as {kind})"
    return f"{shown}{_message(e)}" + (f"; {hint}" if hint else "")


def _message(e: Any) -> str:
    """pydantic prefixes the text of a ValueError raised in a validator with "Value error, " (an assert's with
    "Assertion failed, "); ours are whole sentences: use the exception's own text (kept in ctx["error"])."""
    error = (e.get("ctx") or {}).get("error")
    if e["type"] in ("value_error", "assertion_error") and error is not None:
        return str(error)
    return e["msg"]


# A value shown in a message: never the whole of a large one (reprlib looks at a few items of each collection and the
# start of each string, so a huge value costs no more than a small one).
_SHOWN = reprlib.Repr()  # Python 3.11's Repr takes no arguments
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxset = 2, 3, 3, 3, 3
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 80, 80, 40


def shown_value(value: Any) -> str:
    """`value` for an error message: its repr, cut short."""
    return _SHOWN.repr(value)


def _merge(ep: EndpointSpec, override: EndpointOverride | None) -> EndpointSpec:
    if override is None:
        return ep
    changes = override.model_dump(exclude_unset=True)
    # exclude_unset: the merged endpoint knows which keys the file gave (model_fields_set), as one without overrides
    # does; some defaults depend on the rest of the endpoint (operations.resolved_alarms).
    data = ep.model_dump(exclude_unset=True)
    data.update(changes)
    return EndpointSpec.model_validate(data)


def parse_config(raw: Any, path: Path, document: YamlDocument | None = None) -> AppConfig:
    """Validate `raw` (the file's data) against the schema; `document`, when given, adds each error's line."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the file must be a mapping with an 'endpoints:' list, got {type(raw).__name__}")
    try:
        return AppConfig.model_validate(raw)
    except ValidationError as err:
        lines = _format_validation_error(err, raw, document)
        raise ConfigError(invalid_config(path, lines)) from None


def config_file_problem(path: Path) -> str | None:
    """Why `path` is not a config file to read, in words, or None. Only a regular file (or a link to one) is read: a
    FIFO or a device would block or never end, and "does not exist" is only said of what does not."""
    import stat

    try:
        mode = path.stat().st_mode  # follows links
    except FileNotFoundError:
        return "does not exist" if not path.is_symlink() else "is a link to a file that does not exist"
    except OSError as err:  # a link loop, a name too long, a folder on the way that cannot be searched
        return f"cannot be read: {err.strerror}"
    if stat.S_ISDIR(mode):
        return "is a directory; allowed: a YAML file"
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
        )
        return f"is {kind}, not a regular file; allowed: a YAML file"
    return None


# The most problems one refusal lists: a file of 9,000 unknown keys printed 907 KB of messages (reliability probe).
MAX_PROBLEMS_SHOWN = 50


def invalid_config(path: Path | str, problems: list[str] | tuple[str, ...]) -> str:
    """The message of a refused config: one line per problem, at most MAX_PROBLEMS_SHOWN of them and how many more."""
    shown = list(problems[:MAX_PROBLEMS_SHOWN])
    if len(problems) > MAX_PROBLEMS_SHOWN:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS_SHOWN} more problems (fix these first)")
    return f"{path}: invalid config:\n  - " + "\n  - ".join(shown)


def read_document(path: str | Path) -> YamlDocument:
    """The file's YAML, read within the bounds of endpoint_config/yaml_reader.py (size, aliases, depth, duplicate
    keys, UTF-8); ConfigError naming the file and the line otherwise."""
    path = Path(path)
    if problem := config_file_problem(path):
        raise ConfigError(
            f"config file {shown_value(str(path))} {problem} (cdk: -c config=PATH; model_build: --config PATH)"
        )
    try:
        return read_yaml(path)
    except YamlReadError as err:
        raise ConfigError(f"{path}: {err}") from None


def read_config(path: str | Path) -> AppConfig:
    """Read and validate the whole file against the schema (no environment resolved, no system rules)."""
    document = read_document(path)
    return parse_config(document.data, Path(path), document)


def resolve(config: AppConfig, path: Path, environment: str | None) -> ResolvedEnvironment:
    """Apply `environment`'s overrides (the only one, or the implicit default, when not given) and run the schema's
    cross-field rules on every endpoint."""
    envs = config.environments
    if not envs:
        if environment not in (None, DEFAULT_ENVIRONMENT):
            raise ConfigError(f"{path}: environment {environment!r} is not defined; the file defines no environments")
        env_name, env = DEFAULT_ENVIRONMENT, EnvironmentSpec()
    elif environment is None:
        if len(envs) > 1:
            raise ConfigError(
                f"{path}: the file defines environments {', '.join(envs)}; choose one with -c env=NAME (cdk) or --env NAME (model_build)"
            )
        env_name, env = next(iter(envs.items()))
    elif environment not in envs:
        raise ConfigError(f"{path}: environment {environment!r} is not defined; defined: {', '.join(envs)}")
    else:
        env_name, env = environment, envs[environment]

    problems: list[str] = []
    bucket = bucket_name_problem(config.project, env_name, env.region)
    if bucket:
        problems.append(f"environment {env_name!r}: {bucket}" if envs else bucket)
    endpoints, checked = [], []
    for ep in config.endpoints:
        try:
            merged = _merge(ep, env.overrides.get(ep.name))
        except ValidationError as err:
            problems += [f"environment {env_name!r}: overrides for {ep.name!r}: {e['msg']}" for e in err.errors()]
            continue
        where = f"environment {env_name!r}: " if env.overrides.get(ep.name) else ""
        found = endpoint_problems(merged)
        # The rules that need the environment's account or region.
        found += openai_caller_problems(merged, env_name if envs else None, env.account, env.region)
        found += slo_region_problems(merged, env.region)
        problems += [where + p for p in found]
        endpoints.append(merged)
        if not found:
            checked.append(merged)
    env_where = f"environment {env_name!r}: " if envs else ""
    arns = [(env_where, key, arn) for key, arn in config_arns(env.model_dump(exclude={"overrides"}))]
    arns += [(f"endpoint {ep.name!r}: ", key, arn) for ep in endpoints for key, arn in config_arns(ep.model_dump())]
    problems += arn_region_problems(
        arns, env.region, f"environment {env_name!r} deploys to" if envs else "it deploys to"
    )
    return ResolvedEnvironment(config, path, env_name, env, tuple(endpoints), tuple(checked), tuple(problems))


# S3 bucket names are 3-63 characters (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
BUCKET_NAME_MAX = 63
ACCOUNT_ID_LENGTH = 12


@functools.cache
def longest_region() -> str:
    """The longest region name botocore knows, in any partition: what a bucket name must fit when the config leaves
    the region to the CLI (unknown until deploy)."""
    import botocore.session

    session = botocore.session.get_session()
    regions = {
        r for p in session.get_available_partitions() for r in session.get_available_regions("s3", partition_name=p)
    }
    return max(sorted(regions), key=len)


def bucket_name_problem(project: str, environment_name: str, region: str | None) -> str | None:
    """Why the artifact bucket's name would exceed S3's limit, or None. With no region set, the longest one counts."""
    shown_region = region or longest_region()
    name = artifact_bucket_name(project, environment_name, "1" * ACCOUNT_ID_LENGTH, shown_region)
    if len(name) <= BUCKET_NAME_MAX:
        return None
    why = "" if region else ", the longest region, since the environment sets none"
    return (
        f"the artifact bucket name {name!r} would be {len(name)} characters; S3 allows {BUCKET_NAME_MAX} "
        f"({len(project)} for project {project!r}, {len(environment_name)} for environment {environment_name!r}, "
        f"{ACCOUNT_ID_LENGTH} for the account, {len(shown_region)} for region {shown_region!r}{why}): shorten the "
        f"project or the environment name by {len(name) - BUCKET_NAME_MAX} characters"
        + ("" if region else ", or set the environment's region")
    )


def artifact_bucket_name(project: str, environment_name: str, account: str, region: str) -> str:
    """The artifact bucket's name. Deterministic so model_build publish and every stack agree without lookups
    or cross-stack exports; account and region keep it globally unique."""
    return f"{project}-{environment_name}-artifacts-{account}-{region}"


def image_repository_name(project: str, environment_name: str) -> str:
    """The environment's ECR repository for our own images (named: deterministic, and the emulator needs it)."""
    return f"{project}-{environment_name}"


def artifact_root(endpoint_name: str) -> str:
    """Key prefix of every artifact of one endpoint (each under its content hash, `artifact_prefix`)."""
    return f"models/{endpoint_name}/"


def artifact_prefix(endpoint_name: str, content_hash: str) -> str:
    """Content-addressed key prefix of one built artifact: a changed artifact gets a new prefix, and with it
    a new SageMaker model, so CloudFormation replaces the model cleanly."""
    return f"{artifact_root(endpoint_name)}{content_hash}/"
