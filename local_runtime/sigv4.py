"""SageMaker's SigV4 check, for the local runtime's InvokeEndpoint and response-stream doors (local_runtime/serve.py).

botocore's sagemaker-runtime model (botocore/data/sagemaker-runtime/2017-05-13/service-2.json, metadata
"signatureVersion": "v4", "signingName": "sagemaker"; InvokeEndpoint's documentation: "Calls to InvokeEndpoint are
authenticated by using Amazon Web Services Signature Version 4"): every call is signed for the service `sagemaker` and
the endpoint's region. The check recomputes the signature of the incoming request with botocore's own SigV4Auth
(its canonical request, string to sign and signing key) from the credentials this machine knows (the emulator's fixed
test credentials, local_emulator/moto_server.py) and compares it with the one sent.

Refusals, HTTP 403 in the REST-JSON error shape with x-amzn-ErrorType (the codes AWS's JSON services answer for SigV4
problems, as the OpenAI route's bearer_token.py answers: MissingAuthenticationTokenException,
IncompleteSignatureException, UnrecognizedClientException, InvalidSignatureException). SageMaker's exact wording is
unverified (no account here); the codes and the 403 are what botocore raises as ClientError for them.
Not checked: the session token's value (any is taken, as moto does) and IAM (who may call what).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SERVICE = "sagemaker"  # the model's metadata.signingName
ALGORITHM = "AWS4-HMAC-SHA256"
# The emulator's fixed test credentials (local_emulator/moto_server.py's client environment; the demo's
# sagemaker-runtime client) and region (moto_server.EMULATOR_REGION): tests/local_runtime/test_sigv4.py holds
# these to the emulator's own values.
LOCAL_CREDENTIALS: Mapping[str, str] = {"testing": "testing"}
LOCAL_REGION = "us-east-1"
# SigV4's clock skew: a request dated more than 5 minutes from the server's clock is refused ("Signature expired",
# AWS General Reference, "Signature Version 4 signing": "the request must reach AWS within five minutes of the time
# stamp in the request").
MAX_SKEW = timedelta(minutes=5)
SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"


class SignatureProblem(NamedTuple):
    status: int
    code: str  # x-amzn-ErrorType
    message: str


def _problem(code: str, message: str) -> SignatureProblem:
    return SignatureProblem(403, code, message)


def _parse(header: str) -> dict[str, str] | None:
    """Credential, SignedHeaders and Signature of an `AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`
    header; None when it is not one."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme != ALGORITHM:
        return None
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts[key] = value
    return parts if {"Credential", "SignedHeaders", "Signature"} <= parts.keys() else None


def check_signature(
    method: str,
    raw_path: str,
    query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    region: str,
    credentials: Mapping[str, str] = LOCAL_CREDENTIALS,
    now: datetime | None = None,
) -> SignatureProblem | None:
    """None when the request carries a SigV4 signature for `region` and the service `sagemaker`, made with one of
    `credentials` (access key id -> secret) over exactly these bytes; else the refusal. `raw_path` and `query` as
    sent on the wire (still percent-encoded), `headers` every (name, value) received."""
    received: dict[str, list[str]] = {}
    for name, value in headers:
        received.setdefault(name.lower(), []).append(value)
    authorization = received.get("authorization")
    if not authorization:
        return _problem("MissingAuthenticationTokenException", "Missing Authentication Token")
    parts = _parse(authorization[0])
    if parts is None:
        return _problem(
            "IncompleteSignatureException",
            f"Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' in {ALGORITHM} form",
        )
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return _problem(
            "IncompleteSignatureException", "Credential must be <access key id>/<date>/<region>/<service>/aws4_request"
        )
    key_id, day, scope_region, service, _ = scope
    if key_id not in credentials:
        return _problem("UnrecognizedClientException", "The security token included in the request is invalid.")
    if service != SERVICE:
        return _problem("InvalidSignatureException", f"Credential should be scoped to correct service: '{SERVICE}'.")
    if scope_region != region:
        return _problem(
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region. (this endpoint is in {region!r}, the request is signed "
            f"for {scope_region!r})",
        )
    stamp = (received.get("x-amz-date") or [""])[0]
    try:
        signed_at = _timestamp(stamp)
    except ValueError:
        return _problem("IncompleteSignatureException", "Authorization header requires existence of X-Amz-Date")
    if day != stamp[:8]:
        return _problem("InvalidSignatureException", "Date in Credential scope does not match YYYYMMDD from X-Amz-Date")
    now = now or datetime.now(timezone.utc)
    if abs(now - signed_at) > MAX_SKEW:
        return _problem(
            "InvalidSignatureException",
            f"Signature expired: {stamp} is now earlier than {(now - MAX_SKEW).strftime(SIGV4_TIMESTAMP)} "
            f"({now.strftime(SIGV4_TIMESTAMP)} - 5 min.)",
        )
    signed_names = [n for n in parts["SignedHeaders"].split(";") if n]
    if "host" not in signed_names or any(n not in received for n in signed_names):
        return _problem("IncompleteSignatureException", "SignedHeaders must name host and only headers sent")
    request = AWSRequest(method=method, url=f"http://{received['host'][0]}{raw_path}{'?' + query if query else ''}")
    for name in signed_names:  # exactly the signed headers, in the order and number received
        for value in received[name]:
            request.headers[name] = value
    request.data = body
    request.context["timestamp"] = stamp
    auth = _verifier(key_id, credentials[key_id], region)
    canonical = auth.canonical_request(request)
    expected = auth.signature(auth.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, parts["Signature"]):
        return _problem(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.",
        )
    declared = (received.get("x-amz-content-sha256") or ["UNSIGNED-PAYLOAD"])[0]
    if declared != "UNSIGNED-PAYLOAD" and declared != auth.payload(request):
        return _problem("InvalidSignatureException", "The provided x-amz-content-sha256 header does not match the body")
    return None


def _timestamp(stamp: str) -> datetime:
    """An X-Amz-Date (YYYYMMDDTHHMMSSZ) as a UTC datetime; ValueError when it is not one. By hand: strptime was a
    tenth of the check's time (bench/front_door.py)."""
    if len(stamp) != 16 or stamp[8] != "T" or stamp[15] != "Z" or not (stamp[:8] + stamp[9:15]).isdigit():
        raise ValueError(f"not a SigV4 timestamp: {stamp!r}")
    return datetime(
        int(stamp[0:4]),
        int(stamp[4:6]),
        int(stamp[6:8]),
        int(stamp[9:11]),
        int(stamp[11:13]),
        int(stamp[13:15]),
        tzinfo=timezone.utc,
    )


@lru_cache(maxsize=64)
def _verifier(key_id: str, secret: str, region: str) -> _Verifier:
    """One verifier per credential and region (it holds no request state)."""
    return _Verifier(Credentials(key_id, secret), SERVICE, region)


@lru_cache(maxsize=64)
def _signing_key(secret: str, day: str, region: str) -> bytes:
    """SigV4's signing key, derived as botocore's SigV4Auth.signature derives it (four HMACs, its own _sign), kept
    per secret, day and region: the same for every request of a day."""
    sign = SigV4Auth(Credentials("", secret), SERVICE, region)._sign
    return sign(sign(sign(sign(f"AWS4{secret}".encode(), day), region), SERVICE), "aws4_request")


class _Verifier(SigV4Auth):
    """botocore's SigV4Auth, signing over the headers the client signed (SignedHeaders) rather than every header
    present (SigV4Auth.headers_to_sign's choice when it signs a request of its own), with the signing key kept."""

    def headers_to_sign(self, request: AWSRequest) -> Any:
        return request.headers

    def signature(self, string_to_sign: str, request: AWSRequest) -> str:
        key = _signing_key(self.credentials.secret_key, request.context["timestamp"][0:8], self._region_name)
        return self._sign(key, string_to_sign, hex=True)


def sign(
    method: str,
    url: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    region: str = LOCAL_REGION,
    key_id: str = "testing",
) -> dict[str, str]:
    """`headers` plus the SigV4 headers botocore adds for `method url body` (callers that post with a plain HTTP
    client, such as tests, sign as boto3 does)."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    request.headers["host"] = urlsplit(url).netloc
    SigV4Auth(Credentials(key_id, LOCAL_CREDENTIALS.get(key_id, "wrong")), SERVICE, region).add_auth(request)
    return dict(request.headers.items())
