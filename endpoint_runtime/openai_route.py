"""A client of SageMaker's OpenAI route for the smoke test (stdlib + botocore, as the Lambda runtime ships them).

The bearer token is made exactly as sagemaker.core.token_generator.generate_token makes it (sagemaker-core 2.27.0,
sagemaker/core/token_generator/token_generator.py `_generate_token`): a SigV4 query-presigned POST to
https://sagemaker.amazonaws.com/ with Action=CallWithBearerToken for service "sagemaker" in the region, its URL without
the scheme plus "&Version=1", base64-encoded, after "sagemaker-api-key-". The route: POST
<runtime endpoint>/endpoints/<endpoint>[/inference-components/<component>]/openai/v1/chat/completions with
`Authorization: Bearer <token>` (SageMaker Developer Guide, "Invoke endpoints with OpenAI-compatible APIs").
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

TOKEN_HOST = "sagemaker.amazonaws.com"
TOKEN_PREFIX = "sagemaker-api-key-"
TOKEN_MAX_S = 43200  # 12 hours: generate_token's TOKEN_DURATION and the Developer Guide's limit


def bearer_token(credentials: Any, region: str, expires_s: int = 900) -> str:
    """A bearer token for the OpenAI route from botocore credentials (a session's get_credentials())."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    if not 1 <= expires_s <= TOKEN_MAX_S:
        raise ValueError(f"expires_s must be 1 to {TOKEN_MAX_S}, got {expires_s}")
    request = AWSRequest(
        method="POST",
        url=f"https://{TOKEN_HOST}/",
        headers={"host": TOKEN_HOST},
        params={"Action": "CallWithBearerToken"},
    )
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    SigV4QueryAuth(frozen, "sagemaker", region, expires=expires_s).add_auth(request)
    url = request.url.replace("https://", "") + "&Version=1"
    return TOKEN_PREFIX + base64.b64encode(url.encode("utf-8")).decode("ascii")


def chat_url(runtime_url: str, endpoint: str, component: str | None = None) -> str:
    """The route's chat completions URL under a sagemaker-runtime endpoint URL (the client's meta.endpoint_url:
    https://runtime.sagemaker.<region>.amazonaws.com on AWS, the local server's in the demo)."""
    middle = f"/inference-components/{component}" if component else ""
    return f"{runtime_url.rstrip('/')}/endpoints/{endpoint}{middle}/openai/v1/chat/completions"


def post_chat(url: str, token: str, request: dict, timeout_s: float = 60) -> tuple[int, Any]:
    """POST a (non-streamed) chat request: (status, the decoded JSON answer, or the text when it is not JSON)."""
    data = json.dumps(request).encode("utf-8")
    http = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout_s) as reply:  # an https (or local) URL we build
            status, raw = reply.status, reply.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")[:500]


__all__ = ["bearer_token", "chat_url", "post_chat"]
