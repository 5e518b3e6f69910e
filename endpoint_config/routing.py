"""The `routing:` key of an endpoint: how SageMaker spreads requests over the variant's instances (and copies), the
production variant's RoutingConfig.

Sources (docs/design/prefix-aware-routing.md has the reasoning):
- botocore 1.44.8, sagemaker 2017-07-24 service model: RoutingStrategy LEAST_OUTSTANDING_REQUESTS | RANDOM |
  PREFIX_AWARE | KV_AWARE; PrefixAwareRoutingConfig {PrefixLength 1024-65536, ConcurrencyThreshold 1-1024}, both
  "Required when RoutingStrategy is PREFIX_AWARE", the block "only when you set RoutingStrategy to PREFIX_AWARE",
  described as "prefix-aware routing on a SageMaker real-time inference endpoint".
- cfn-lint 1.58's schema of AWS::SageMaker::EndpointConfig: the same two bounds; its RoutingStrategy enum has no
  KV_AWARE, so CloudFormation cannot set that one and it is not offered here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from .base import Strict

if TYPE_CHECKING:
    from .schema import EndpointSpec

# Config value -> RoutingStrategy.
ROUTING_STRATEGIES = {
    "random": "RANDOM",
    "least-outstanding-requests": "LEAST_OUTSTANDING_REQUESTS",
    "prefix-aware": "PREFIX_AWARE",
}
PREFIX_AWARE = "prefix-aware"
PREFIX_LENGTH_BOUNDS = (1024, 65536)  # PrefixAwareRoutingPrefixLength: min 1024, max 65536
CONCURRENCY_THRESHOLD_BOUNDS = (1, 1024)  # PrefixAwareRoutingConcurrencyThreshold: min 1, max 1024
# Neither botocore nor cfn-lint gives a default (both keys are required with PREFIX_AWARE): these are ours.
# 4096 bytes of the request body (characters of the messages' text on the OpenAI route) hold a system prompt of
# about a thousand tokens plus the start of what differs per request, so one shared preamble alone does not send
# every request to one instance.
DEFAULT_PREFIX_LENGTH = 4096
# Low on purpose: a request whose prefix's instance (or copy) already has this many in flight goes to another one
# instead of queueing behind them; a low value costs cache hits, a high one queues requests on one hot instance.
# Raise it towards what one copy serves at once (the engine's batch) once measured.
DEFAULT_CONCURRENCY_THRESHOLD = 4
PREFIX_AWARE_SETTINGS = ("prefix_length", "concurrency_threshold")


class Routing(Strict):
    """How SageMaker picks the instance (and, on an inference-component endpoint, the copy) for each request.

    strategy: random (SageMaker's default), least-outstanding-requests (the instance with the fewest requests in
      flight: suits long, uneven generations) or prefix-aware (requests sharing their first prefix_length bytes go
      to the same instance, whose engine then finds the prefix in its KV cache).
    prefix_length: prefix-aware only: bytes of the InvokeEndpoint body (characters of the messages' text on
      SageMaker's OpenAI route) compared, 1024-65536 (default 4096, ours: SageMaker has none).
    concurrency_threshold: prefix-aware only: requests in flight on the chosen instance (copy, with inference
      components) at which SageMaker sends the next one elsewhere, 1-1024 (default 4, ours: SageMaker has none).

    `routing: <strategy>` is short for `routing: {strategy: <strategy>}`."""

    strategy: Literal["random", "least-outstanding-requests", "prefix-aware"] = "random"
    prefix_length: int | None = Field(None, ge=PREFIX_LENGTH_BOUNDS[0], le=PREFIX_LENGTH_BOUNDS[1])
    concurrency_threshold: int | None = Field(
        None, ge=CONCURRENCY_THRESHOLD_BOUNDS[0], le=CONCURRENCY_THRESHOLD_BOUNDS[1]
    )

    @model_validator(mode="before")
    @classmethod
    def _strategy_alone(cls, data: Any) -> Any:
        return {"strategy": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _settings_only_with_prefix_aware(self) -> Routing:
        # botocore: PrefixAwareRoutingConfig "Specify this parameter only when you set RoutingStrategy to PREFIX_AWARE".
        given = [key for key in PREFIX_AWARE_SETTINGS if getattr(self, key) is not None]
        if given and self.strategy != PREFIX_AWARE:
            raise ValueError(
                f"{', '.join(given)}: only used with strategy: prefix-aware (strategy is {self.strategy!r}); "
                f"set strategy: prefix-aware or remove {'them' if len(given) > 1 else 'it'}"
            )
        return self

    @property
    def api_strategy(self) -> str:
        """The RoutingStrategy value."""
        return ROUTING_STRATEGIES[self.strategy]

    @property
    def prefix_aware(self) -> tuple[int, int] | None:
        """(PrefixLength, ConcurrencyThreshold) with the defaults filled in, for strategy prefix-aware; else None."""
        if self.strategy != PREFIX_AWARE:
            return None
        return (
            self.prefix_length if self.prefix_length is not None else DEFAULT_PREFIX_LENGTH,
            self.concurrency_threshold if self.concurrency_threshold is not None else DEFAULT_CONCURRENCY_THRESHOLD,
        )


def routing_problems(ep: EndpointSpec) -> list[str]:
    """The combinations prefix-aware routing does not serve, each naming endpoint, key, value and what is allowed."""
    if ep.routing.strategy != PREFIX_AWARE:
        return []
    problems = []
    if ep.invocation.mode == "async":
        # botocore 1.44.8: PrefixAwareRoutingConfig is "for prefix-aware routing on a SageMaker real-time inference
        # endpoint"; PrefixLength counts the body of InvokeEndpoint / InvokeEndpointWithResponseStream (or the
        # OpenAI route's messages), and only those two take the PrefixAwareId hint: InvokeEndpointAsync is not named.
        # Whether CreateEndpointConfig itself refuses the pair is unverified; refused here, where it does nothing known.
        problems.append(
            f"endpoint {ep.name!r}: routing.strategy: value 'prefix-aware' is for real-time endpoints only "
            "(SageMaker documents it for InvokeEndpoint and InvokeEndpointWithResponseStream, not for "
            "InvokeEndpointAsync); with invocation.mode: async use routing random or least-outstanding-requests"
        )
    return problems


def prefix_cache_problems(ep: EndpointSpec, keeps_prefix_cache: bool | None) -> list[str]:
    """Prefix-aware routing against the engine's prefix cache as its parsed options set it (EngineOptions
    .keeps_prefix_cache; run with the system's rules, systems/checks.py, where the options are parsed)."""
    if ep.routing.strategy != PREFIX_AWARE or keeps_prefix_cache is not False:
        return []
    # Routing by prefix pays only where the engine keeps the prefix's KV cache between requests.
    return [
        f"endpoint {ep.name!r}: routing.strategy: value 'prefix-aware' sends requests sharing a prefix to one "
        "instance so that its engine reuses the prefix's KV cache, which engine.enable_prefix_caching: false "
        "turns off; remove enable_prefix_caching: false or use routing least-outstanding-requests"
    ]


__all__ = [
    "CONCURRENCY_THRESHOLD_BOUNDS",
    "DEFAULT_CONCURRENCY_THRESHOLD",
    "DEFAULT_PREFIX_LENGTH",
    "PREFIX_LENGTH_BOUNDS",
    "ROUTING_STRATEGIES",
    "Routing",
    "prefix_cache_problems",
    "routing_problems",
]
