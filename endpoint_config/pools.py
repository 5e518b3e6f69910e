"""`instance_pools:` and `capacity:` of an endpoint: fallback instance types for the production variant, in priority
order after `instance_type`, and how long and where SageMaker provisions its instances.

Sources (docs/design/instance-pools.md has the reasoning and what stays unverified):
- botocore's sagemaker 2017-07-24 service model (the one in this venv): ProductionVariant.InstancePools
  (InstancePoolList, min 1, max 5), InstancePool {InstanceType, Priority 1-5 ("1 is the highest priority";
  "SageMaker attempts to provision instances in order of priority, starting with the lowest value"),
  ModelNameOverride ("a SageMaker model to use for this instance pool instead of the model specified for the
  production variant")}; VariantInstanceProvisionTimeoutInSeconds 300-3600 ("When SageMaker encounters an
  insufficient capacity error ... it retries with the next instance pool (if configured) or waits until the
  timeout expires"); ProductionVariantCapacityReservationConfig {CapacityReservationPreference
  capacity-reservations-only, MlReservationArn}.
- cfn-lint 1.58's schema of AWS::SageMaker::EndpointConfig: the same shapes, InstancePools maxItems 5, Priority
  1-5, the provision timeout 300-3600, MlReservationArn pattern `^arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:
  [a-z0-9\\-]{1,14}/` (20-258 characters).
- aws-cdk-lib's L1 CfnEndpointConfig: InstancePoolProperty, CapacityReservationConfigProperty,
  ProductionVariantProperty.instance_pools / variant_instance_provision_timeout_in_seconds.
- SageMaker Developer Guide, "Deploy to multiple instance types with instance pools"
  (realtime-endpoints-heterogeneous): "you replace the InstanceType parameter in your production variant with an
  InstancePools list" (so the primary instance_type becomes the priority-1 pool); pools serve real-time and
  asynchronous endpoints, single-model endpoints and inference components.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from .base import Strict

if TYPE_CHECKING:
    from .schema import EndpointSpec

# InstancePoolList max 5 (botocore) / maxItems 5 (cfn-lint): `instance_type` is the first, so four fallbacks.
MAX_POOLS = 5
MAX_FALLBACK_POOLS = MAX_POOLS - 1
PROVISION_TIMEOUT_BOUNDS = (300, 3600)  # VariantInstanceProvisionTimeoutInSeconds
# cfn-lint's CapacityReservationConfig.MlReservationArn pattern and length (20-258).
RESERVATION_ARN_PATTERN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.+$"
# The one CapacityReservationPreference SageMaker documents: "launches instances only into an ML capacity
# reservation. If no capacity is available, the instances fail to launch."
RESERVATIONS_ONLY = "capacity-reservations-only"


class InstancePool(Strict):
    """One fallback instance type. tensor_parallel_degree: the engine's degree on this type (default: the
    endpoint's); a pool whose engine settings differ from the primary's gets its own SageMaker model."""

    instance_type: str
    tensor_parallel_degree: int | None = Field(None, ge=1, le=64)


class Capacity(Strict):
    """How SageMaker provisions the variant's instances.

    provision_timeout_s: VariantInstanceProvisionTimeoutInSeconds, 300-3600: how long SageMaker keeps trying to get
      instances (across the pools, in priority order) on insufficient capacity before the operation fails; model
      download and container start are not counted. Unset: SageMaker's own default (not documented).
    reservation_arn: an ML capacity reservation (MlReservationArn) the instances launch into, and only into
      (CapacityReservationPreference capacity-reservations-only: "If no capacity is available, the instances fail
      to launch")."""

    provision_timeout_s: int | None = Field(None, ge=PROVISION_TIMEOUT_BOUNDS[0], le=PROVISION_TIMEOUT_BOUNDS[1])
    reservation_arn: str | None = Field(None, min_length=20, max_length=258, pattern=RESERVATION_ARN_PATTERN)
    # How many instances the reservation holds: required with reservation_arn, which launches only into it, and the
    # endpoint's peak (its largest fleet plus what an update adds) must fit (engines review E3).
    reserved_instances: int | None = Field(None, ge=1, le=1000)

    @property
    def reservation_preference(self) -> str | None:
        """CapacityReservationPreference with a reservation: RESERVATIONS_ONLY, the one SageMaker documents."""
        return RESERVATIONS_ONLY if self.reservation_arn is not None else None


def pool_problems(ep: EndpointSpec) -> list[str]:
    """The rules of the pools as a whole (each pool's own instance rules are the primary's: schema.endpoint_problems
    runs them on EndpointSpec.pool_specs). One message per problem, naming endpoint, key, value and what is allowed."""
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    if ep.capacity is not None and ep.hosting.uses_components:
        bad(
            "capacity",
            "is not supported with hosting.mode inference-components here (the component endpoint config does not "
            "render it yet); remove capacity or use hosting.mode model (the default)",
        )
    problems += reservation_problems(ep)
    if not ep.instance_pools:
        return problems

    if len(ep.instance_pools) > MAX_FALLBACK_POOLS:
        bad(
            "instance_pools",
            f"has {len(ep.instance_pools)} pools; SageMaker takes at most {MAX_POOLS} instance pools per variant "
            f"(InstancePoolList max 5) and instance_type is the first: allowed: 1-{MAX_FALLBACK_POOLS} fallbacks",
        )
    seen = {ep.instance_type: "instance_type"}
    for i, pool in enumerate(ep.instance_pools):
        if pool.instance_type in seen:
            bad(
                f"instance_pools[{i}].instance_type",
                f"value {pool.instance_type!r} is already {seen[pool.instance_type]}; each pool is another instance "
                "type (give a different tensor_parallel_degree to the one pool of that type)",
            )
        seen.setdefault(pool.instance_type, f"instance_pools[{i}]")
    if ep.hosting.uses_components:
        # The DG says pools serve inference components too, but a component endpoint's variant has no model
        # (ModelNameOverride has nothing to override) and a component sized for one GPU type is placed on the
        # others unchanged: a per-type component specification is not built here.
        bad(
            "instance_pools",
            "is not supported with hosting.mode inference-components here: the component's compute requirements are "
            "sized for instance_type alone; remove instance_pools or use hosting.mode model (the default)",
        )
    if ep.capacity is not None and ep.capacity.reservation_arn is not None and ep.instance_pools:
        # Which pool a reservation of one instance type applies to is not documented: refused until it is.
        bad(
            "capacity.reservation_arn",
            "is not supported together with instance_pools (SageMaker does not document which pool an ML capacity "
            "reservation applies to); remove one of them",
        )
    return problems


# botocore's sagemaker model: BlueGreenUpdatePolicy "SageMaker creates a new fleet during the deployment while
# maintaining the old fleet" and DeploymentConfig "If no update policy is specified, SageMaker uses a blue/green
# deployment strategy"; CapacityReservationPreference capacity-reservations-only "If no capacity is available, the
# instances fail to launch".
RESERVATION_SOURCES = (
    'BlueGreenUpdatePolicy: "SageMaker creates a new fleet during the deployment while maintaining the old fleet" '
    '(also with deployment: null: "If no update policy is specified, SageMaker uses a blue/green deployment '
    'strategy"); capacity-reservations-only: "If no capacity is available, the instances fail to launch" '
    "(botocore's sagemaker service model)"
)


def reservation_peak(ep: EndpointSpec) -> tuple[int, str]:
    """The most instances the endpoint runs at once, and why: its largest fleet (autoscaling.max_capacity, else
    instance_count) plus what an update adds while both fleets run (blue/green: a whole new fleet; rolling: a
    batch, or the rollback batch, by default the whole fleet). deployment/plan.py quota_need is the same computation
    for the quota check (tests/config/test_capacity_reservation.py holds the two equal); this package may not import
    deployment/."""
    from .operations import Rolling

    steady = ep.autoscaling.max_capacity if ep.autoscaling is not None else ep.instance_count
    where = "autoscaling.max_capacity" if ep.autoscaling is not None else "instance_count"
    policy = ep.deployment.policy if ep.deployment is not None else None
    if isinstance(policy, Rolling):
        forward = policy.maximum_batch_size.instances_of(steady)
        back = policy.rollback_maximum_batch_size.instances_of(steady) if policy.rollback_maximum_batch_size else steady
        return steady + max(forward, back), f"{where} {steady} + a rolling batch of {forward} ({back} on rollback)"
    return 2 * steady, f"{where} {steady} + a blue/green update's new fleet of {steady}"


def reservation_problems(ep: EndpointSpec) -> list[str]:
    """capacity.reservation_arn: the config says how many instances the reservation holds, and the endpoint's peak
    fits in it, since every instance launches only into the reservation (E3: accepted before with a blue/green update
    and autoscaling that the reservation may not hold, failing at the first update or scale-out)."""
    capacity = ep.capacity
    if capacity is None or capacity.reservation_arn is None or ep.hosting.uses_components:
        return []
    peak, why = reservation_peak(ep)
    where = f"endpoint {ep.name!r}: capacity.reserved_instances"
    if capacity.reserved_instances is None:
        return [
            f"{where}: required with reservation_arn (how many instances the reservation holds): this endpoint runs "
            f"up to {peak} at once ({why}), and every instance launches only into the reservation; {RESERVATION_SOURCES}"
        ]
    if peak > capacity.reserved_instances:
        return [
            f"{where}: value {capacity.reserved_instances} is below the {peak} instances this endpoint runs at once "
            f"({why}); {RESERVATION_SOURCES}. Allowed: a reservation of {peak} or more, or fewer at once: "
            "deployment.rolling with a small maximum_batch_size and rollback_maximum_batch_size, or a lower "
            "autoscaling.max_capacity"
        ]
    return []


__all__ = [
    "Capacity",
    "InstancePool",
    "MAX_FALLBACK_POOLS",
    "MAX_POOLS",
    "PROVISION_TIMEOUT_BOUNDS",
    "RESERVATIONS_ONLY",
    "pool_problems",
    "reservation_peak",
    "reservation_problems",
]
