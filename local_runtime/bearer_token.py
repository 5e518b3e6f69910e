"""The shape check of SageMaker's bearer tokens, for the local server's OpenAI route (local_runtime/serve.py).

Checks the shape sagemaker-core 2.27.0's generate_token makes, the expiry (at most 12 hours) and the region; not the
signature or IAM. A refusal is HTTP 403 in AWS's REST-JSON error shape (SageMaker's own wording unverified).
The token's layout and the sources: docs/design/local-server.md.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import datetime, timedelta, timezone
from typing import NamedTuple
from urllib.parse import parse_qs

PREFIX = "sagemaker-api-key-"
HOST = "sagemaker.amazonaws.com"
ACTION = "CallWithBearerToken"
ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sagemaker"
MAX_EXPIRES_S = 43200  # 12 hours
CLOCK_SKEW = timedelta(minutes=15)  # AWS accepts a request date at most 15 minutes ahead (RequestExpired)
_REQUIRED = (
    "Action",
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "Version",
)
_KNOWN = (*_REQUIRED, "X-Amz-Security-Token")
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")


class TokenProblem(NamedTuple):
    status: int
    code: str  # x-amzn-ErrorType
    message: str


def _invalid(message: str) -> TokenProblem:
    return TokenProblem(403, "InvalidSignatureException", message)


def check_authorization(
    header: str | None, region: str | None = None, now: datetime | None = None
) -> TokenProblem | None:
    """None when `header` ("Bearer <token>") carries a well-formed, unexpired SageMaker bearer token scoped to
    `region` (any region when None); else the refusal."""
    if not header or not header.strip():
        return TokenProblem(
            403,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token: send Authorization: Bearer <token from "
            "sagemaker.core.token_generator.generate_token>",
        )
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _invalid(f"Authorization must be 'Bearer <token>', got a {scheme!r} credential")
    token = token.strip()
    if not token.startswith(PREFIX):
        return _invalid(
            f"the bearer token must start with {PREFIX!r} (generate_token makes it); got one starting {token[:12]!r}"
        )
    try:
        url = base64.b64decode(token[len(PREFIX) :], validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return _invalid(f"the bearer token after {PREFIX!r} is not base64 of a presigned URL")
    host, _, query = url.partition("/?")
    if host != HOST:
        return _invalid(f"the bearer token is presigned for {host!r}; it must be for {HOST!r}")
    params = parse_qs(query, keep_blank_values=True)
    missing = [k for k in _REQUIRED if k not in params]
    if missing:
        return _invalid(f"the bearer token lacks {missing}")
    extra = sorted(k for k in params if k not in _KNOWN)
    if extra or any(len(v) != 1 for v in params.values()):
        return _invalid(f"the bearer token has unexpected or repeated parameters {extra or sorted(params)}")
    value = {k: v[0] for k, v in params.items()}
    if value["Action"] != ACTION or value["Version"] != "1":
        return _invalid(
            f"the bearer token is for Action={value['Action']!r} Version={value['Version']!r}; "
            f"it must be for Action={ACTION!r} Version='1'"
        )
    if value["X-Amz-Algorithm"] != ALGORITHM or value["X-Amz-SignedHeaders"] != "host":
        return _invalid(f"the bearer token must be signed with {ALGORITHM} over the host header")
    if not _SIGNATURE.match(value["X-Amz-Signature"]):
        return _invalid("the bearer token's X-Amz-Signature must be 64 hexadecimal digits")
    scope = value["X-Amz-Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request" or not scope[0]:
        return _invalid("the bearer token's X-Amz-Credential must be <key id>/<date>/<region>/sagemaker/aws4_request")
    key_id, day, scope_region, service, _ = scope
    if service != SERVICE:
        return _invalid(
            f"Credential should be scoped to correct service: '{SERVICE}' (the token is scoped to {service!r})"
        )
    if not _REGION.match(scope_region) or (region is not None and scope_region != region):
        return _invalid(
            f"Credential should be scoped to a valid region, not {scope_region!r}"
            + (f"; this endpoint is in {region!r}" if region else "")
        )
    try:
        signed = datetime.strptime(value["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        expires = int(value["X-Amz-Expires"])
    except ValueError:
        return _invalid("the bearer token's X-Amz-Date must be yyyymmddTHHMMSSZ and X-Amz-Expires whole seconds")
    if day != value["X-Amz-Date"][:8]:
        return _invalid("the bearer token's credential date is not its X-Amz-Date's day")
    if not 1 <= expires <= MAX_EXPIRES_S:
        return _invalid(f"the bearer token's X-Amz-Expires is {expires} s; allowed: 1 to {MAX_EXPIRES_S} (12 hours)")
    now = now or datetime.now(timezone.utc)
    if signed - now > CLOCK_SKEW:
        return _invalid(f"the bearer token is signed at {value['X-Amz-Date']}, more than 15 minutes in the future")
    if now > signed + timedelta(seconds=expires):
        end = (signed + timedelta(seconds=expires)).strftime("%Y%m%dT%H%M%SZ")
        return _invalid(f"the bearer token expired at {end}; make a new one with generate_token")
    return None
