"""The `streaming:` block of an endpoint: a front door that streams generated tokens to clients as the model
produces them (SageMaker InvokeEndpointWithResponseStream behind a Lambda function URL in RESPONSE_STREAM invoke
mode; stacks/streaming.py builds it, endpoint_runtime/stream.py is its code, docs/production.md "Streaming").

Which systems stream is each system's own fact (ServingSystem.streaming).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Strict


class StreamingSpec(Strict):
    """The streaming front door of one endpoint. Defaults: off; when on, callers sign their requests (IAM)."""

    enabled: bool = False
    # iam: the function URL's AuthType AWS_IAM, callers need lambda:InvokeFunctionUrl on it and sign with SigV4.
    # none: anyone who learns the URL can generate tokens on the GPUs you pay for; only with the acknowledgement
    # and reserved_concurrency (the cap on concurrent streams); synth warns.
    auth: Literal["iam", "none"] = "iam"
    acknowledge_unauthenticated: bool = False
    # Caps concurrent streams (and reserves that share of the account's Lambda concurrency). None: unreserved.
    reserved_concurrency: int | None = Field(None, ge=1, le=1000)
    # The function's timeout: how long one stream may last. Lambda allows at most 900 s.
    timeout_s: int = Field(300, ge=60, le=900)

    @model_validator(mode="after")
    def _auth_acknowledged(self) -> StreamingSpec:
        if self.auth == "none" and not self.acknowledge_unauthenticated:
            raise ValueError(
                "auth: value 'none' makes the function URL callable by anyone on the internet, generating on the "
                "endpoint at your cost; allowed: 'iam' (the default), or 'none' together with "
                "acknowledge_unauthenticated: true"
            )
        if self.auth == "none" and self.reserved_concurrency is None:
            # A public URL with no cap lets anyone take the account's whole unreserved Lambda concurrency and keep
            # the GPUs busy; reserved concurrency is the one cap a function URL has (Lambda Developer Guide,
            # "Configuring reserved concurrency"; urls-auth.html: AuthType NONE "Lambda doesn't perform IAM
            # authentication on requests to your function URL").
            raise ValueError(
                "reserved_concurrency: value None with auth 'none' leaves a public URL without a cap on concurrent "
                "streams (it could take the account's unreserved Lambda concurrency and keep the GPUs busy); "
                "allowed: 1-1000 (the most streams at once), or auth: iam"
            )
        if self.acknowledge_unauthenticated and self.auth != "none":
            raise ValueError(
                f"acknowledge_unauthenticated: value true has no effect with auth {self.auth!r}; remove it "
                "(it belongs only beside auth: none)"
            )
        return self


__all__ = ["StreamingSpec"]
