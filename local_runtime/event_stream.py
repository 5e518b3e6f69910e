"""AWS event-stream messages (application/vnd.amazon.eventstream), as SageMaker's InvokeEndpointWithResponseStream
answers, so that the local server's response-stream path reaches a boto3 client exactly as a deployed endpoint does.

The wire format is the one botocore's decoder reads (botocore/eventstream.py: EventStreamBuffer,
EventStreamHeaderParser): a 12-byte prelude [total length][headers length][CRC32 of those 8 bytes] (big-endian
uint32), the headers, the payload, and a CRC32 of everything before it. A string header is
[name length: uint8][name][type 7][value length: uint16][value]. What the headers say comes from botocore's
sagemaker-runtime service model (InvokeEndpointWithResponseStream: output Body is an event stream whose members are
the PayloadPart event, with Bytes as its blob payload, and the ModelStreamError and InternalStreamFailure
exceptions) and its event-stream parser (botocore/parsers.py BaseEventStreamParser: `:event-type` picks the member;
`:message-type: exception` with `:exception-type` raises EventStreamError carrying the JSON body's Message).
"""

from __future__ import annotations

import json
import struct
from binascii import crc32

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", crc32(prelude) & 0xFFFFFFFF)
    body = prelude + encoded + payload
    return body + struct.pack("!I", crc32(body) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    """A PayloadPart event carrying `data` (boto3: {"PayloadPart": {"Bytes": data}})."""
    return message(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, data
    )


def model_stream_error(text: str, error_code: str) -> bytes:
    """A ModelStreamError exception (boto3 raises EventStreamError with Code ModelStreamError while iterating).
    SageMaker's codes: ModelInvocationTimeExceeded, StreamBroken (API reference, ResponseStream)."""
    body = json.dumps({"Message": text, "ErrorCode": error_code}, ensure_ascii=True).encode()
    return message(
        {":exception-type": "ModelStreamError", ":content-type": "application/json", ":message-type": "exception"}, body
    )


__all__ = ["CONTENT_TYPE", "message", "model_stream_error", "payload_part"]
