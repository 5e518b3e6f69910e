"""S3's own rules on a general purpose bucket's name, checked on every s3:// location the config names (the
Amazon S3 User Guide, "General purpose bucket naming rules",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3-63 characters of lowercase
letters, digits, '.' and '-', beginning and ending with a letter or digit; no two adjacent periods; not formatted
as an IP address; not starting with xn--, sthree- or amzn-s3-demo-; not ending with -s3alias (access point
aliases), --ol-s3 (Object Lambda access point aliases), .mrap (Multi-Region Access Points), --x-s3 (directory
buckets) or --table-s3 (table buckets). S3 refuses such a name, so a location naming one fails at deploy or when
SageMaker first writes there."""

from __future__ import annotations

import re

_CHARACTERS = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
RULES = (
    "a bucket name S3 allows (3-63 of a-z, 0-9, '.', '-', beginning and ending with a letter or digit, no '..', not "
    f"an IP address, not starting with {', '.join(RESERVED_PREFIXES)}, not ending with {', '.join(RESERVED_SUFFIXES)}:"
    " the S3 User Guide's general purpose bucket naming rules)"
)


def bucket_name_problem(bucket: str) -> str | None:
    """What S3's naming rules say against `bucket`, or None."""
    if not _CHARACTERS.match(bucket):
        return "is not 3-63 of a-z, 0-9, '.' and '-' beginning and ending with a letter or digit"
    if ".." in bucket:
        return "has two adjacent periods"
    if _IP_ADDRESS.match(bucket):
        return "is formatted as an IP address"
    if bucket.startswith(RESERVED_PREFIXES):
        return f"starts with a prefix S3 reserves ({', '.join(p for p in RESERVED_PREFIXES if bucket.startswith(p))})"
    if bucket.endswith(RESERVED_SUFFIXES):
        return f"ends with a suffix S3 reserves ({', '.join(s for s in RESERVED_SUFFIXES if bucket.endswith(s))})"
    return None


def check_s3_location(value: str) -> str:
    """An s3://bucket/... value whose bucket S3 would accept; ValueError naming the bucket and the rule."""
    bucket = value.removeprefix("s3://").partition("/")[0]
    if (problem := bucket_name_problem(bucket)) is not None:
        raise ValueError(f"bucket {bucket!r} {problem}; allowed: {RULES}")
    return value
