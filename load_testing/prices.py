"""The hourly on-demand price of a SageMaker hosting instance, for the load test's $ per million tokens.

Primary source: the AWS Price List Query API (`pricing` GetProducts, botocore 1.44.8 service model pricing/2017-10-15:
ServiceCode, Filters of {Type, Field, Value}, PriceList items as JSON). The query is the one AWS's own LLMeter uses
for SageMaker real-time endpoints (awslabs/llmeter llmeter/callbacks/cost/providers/sagemaker.py, commit 1c0a6e1a,
`fetch_sm_hosting_od_price`): ServiceCode AmazonSageMaker, TERM_MATCH on component=Hosting, instanceName and
regionCode, exactly one product with one OnDemand term whose price dimension has unit "Hrs", pricePerUnit USD; the
API answers from us-east-1. Needs `pricing:GetProducts`. Not run against AWS from this repository's machines (no
account): the query's filters are LLMeter's, unverified here.

A fetched price can be kept in a dated table (JSON: fetched_at, source, region -> instance type -> USD/h), so a
later run (or a gate without `pricing:GetProducts`) prices from it and says how old the price is. The repository
ships no prices: none could be read from a primary source here.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

PRICE_LIST_REGION = "us-east-1"
SOURCE = (
    "AWS Price List Query API GetProducts: AmazonSageMaker, component=Hosting, instanceName, regionCode; "
    "OnDemand, unit Hrs, USD"
)


class PriceError(Exception):
    """No single on-demand hosting price could be established; the message says why."""


def _item(raw: Any) -> dict[str, Any]:
    return json.loads(raw) if isinstance(raw, str) else raw


def hosting_price_from_products(products: list[Any], instance_type: str, region: str) -> float:
    """The USD hourly on-demand price in GetProducts' PriceList items; PriceError unless exactly one applies."""
    items = [_item(p) for p in products]
    where = f"{instance_type} hosting in {region}"
    if len(items) != 1:
        raise PriceError(f"the Price List API returned {len(items)} products for {where}, expected 1")
    terms = (items[0].get("terms") or {}).get("OnDemand") or {}
    if len(terms) != 1:
        raise PriceError(f"{where}: expected one OnDemand term, got {len(terms)}")
    dims = [
        d
        for d in next(iter(terms.values())).get("priceDimensions", {}).values()
        if str(d.get("unit", "")).lower() == "hrs"
    ]
    if len(dims) != 1:
        raise PriceError(f"{where}: expected one hourly price dimension, got {len(dims)}")
    usd = (dims[0].get("pricePerUnit") or {}).get("USD")
    no_price = PriceError(f"{where}: no USD price per unit ({usd!r})")
    if usd is None:
        raise no_price
    try:
        price = float(usd)
    except (TypeError, ValueError):
        raise no_price from None
    if price <= 0:
        raise PriceError(f"{where}: price {price} is not positive")
    return price


def fetch_hosting_price(instance_type: str, region: str, client: Any = None) -> float:
    """Ask the Price List API (pricing:GetProducts) for an instance type's on-demand hosting price in a region."""
    import botocore.exceptions

    if client is None:
        import boto3

        client = boto3.client("pricing", region_name=PRICE_LIST_REGION)
    filters = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v}
        for k, v in (("component", "Hosting"), ("instanceName", instance_type), ("regionCode", region))
    ]
    products: list[Any] = []
    try:
        for page in client.get_paginator("get_products").paginate(ServiceCode="AmazonSageMaker", Filters=filters):
            products += page.get("PriceList", [])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
        raise PriceError(f"the Price List API refused the query for {instance_type} in {region}: {err}") from None
    return hosting_price_from_products(products, instance_type, region)


def write_table(path: Path, prices: dict[str, dict[str, float]]) -> Path:
    """Keep fetched prices in a dated table (region -> instance type -> USD per hour)."""
    table = {"fetched_at": datetime.now(timezone.utc).date().isoformat(), "source": SOURCE, "prices": prices}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return Path(path)


def price_from_table(path: Path, instance_type: str, region: str) -> tuple[float, str]:
    """(USD per hour, a line naming the table, its source and date); PriceError when the table lacks it."""
    try:
        table = json.loads(Path(path).read_text())
    except OSError as err:
        raise PriceError(f"price table {path}: {err.strerror}") from None
    except ValueError as err:
        raise PriceError(f"price table {path}: not JSON ({err})") from None
    if not isinstance(table, dict) or not isinstance(table.get("prices"), dict) or "fetched_at" not in table:
        raise PriceError(f"price table {path}: expected {{fetched_at, source, prices: {{region: {{type: USD}}}}}}")
    price = (table["prices"].get(region) or {}).get(instance_type)
    if not isinstance(price, (int, float)) or isinstance(price, bool) or price <= 0:
        raise PriceError(
            f"price table {path} (fetched {table['fetched_at']}) has no price for {instance_type} in "
            f"{region}; it has {sorted(table['prices'])} regions"
        )
    return float(price), f"{path}: {table.get('source', 'unknown source')}, fetched {table['fetched_at']}"


__all__ = ["PriceError", "fetch_hosting_price", "hosting_price_from_products", "price_from_table", "write_table"]
