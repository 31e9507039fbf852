"""A dependency-free Kafka readiness probe: one Metadata request over a plain socket.

Synchronous on purpose, so it works from a CLI, a pytest fixture or code that is
already inside a running asyncio loop (where aiokafka's admin client cannot be
driven with asyncio.run).
"""

from __future__ import annotations

import socket
import struct

METADATA_KEY = 3
METADATA_VERSION = 4  # lowest version Kafka 4.x still serves (KIP-896); non-flexible


def _request(correlation_id: int) -> bytes:
    """Metadata v4 asking for no topics: the answer lists only the live brokers."""
    client_id = b"ckptlog-probe"
    header = struct.pack(">hhih", METADATA_KEY, METADATA_VERSION, correlation_id, len(client_id))
    body = struct.pack(">ib", 0, 0)  # topics = [] ; allow_auto_topic_creation = false
    payload = header + client_id + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection mid-response")
        buf.extend(chunk)
    return bytes(buf)


def _parse_brokers(data: bytes, correlation_id: int) -> list[tuple[int, str, int]]:
    """Decode the broker list at the start of a Metadata v4 response."""
    got_id, _throttle, count = struct.unpack_from(">iii", data, 0)
    if got_id != correlation_id:
        raise ConnectionError("response does not match the request (not a Kafka broker?)")
    pos, brokers = 12, []
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", data, pos)
        pos += 6
        host = data[pos : pos + host_len].decode()
        pos += host_len
        (port, rack_len) = struct.unpack_from(">ih", data, pos)
        pos += 6 + max(rack_len, 0)
        brokers.append((node_id, host, port))
    return brokers


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Live brokers as the broker at host:port reports them; raises OSError if it cannot.

    A non-empty list means the broker is registered and unfenced, i.e. ready to
    serve produce, fetch, group and transaction requests.
    """
    correlation_id = 7
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_request(correlation_id))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        return _parse_brokers(_recv_exact(sock, size), correlation_id)


def answers(bootstrap: str, timeout: float = 2.0) -> bool:
    """True when `host:port` is a Kafka broker that reports at least one live broker."""
    host, _, port = bootstrap.rpartition(":")
    try:
        return bool(metadata_brokers(host, int(port), timeout))
    except (OSError, ValueError, struct.error):
        return False
