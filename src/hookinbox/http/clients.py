"""Who a request came from: the peer's address, or the one a trusted proxy names.

The server puts the TCP peer in the ASGI scope's ``client`` and nothing else; hookinbox
reads ``X-Forwarded-For`` only when that peer is one of ``[server] forwarded_allow_ips``
(addresses or CIDR blocks, none by default). A header from anyone else is the sender's
own text, so believing it would let one client be any number of clients (and any other
client's address). Behind a chain of proxies the header is read from the right, skipping
the trusted hops: the first address no trusted proxy owns is the client, since each
trusted hop appends the peer it saw and only what is left of them came from outside.

Only RFC 7239's predecessor is read (``X-Forwarded-For``, what nginx, HAProxy and the
cloud load balancers send); ``Forwarded`` is not.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import Scope

#: The address of a request whose server gave no peer (a Unix socket, a test transport).
UNKNOWN = "-"
#: The longest hop text taken from the header when it is not an address.
MAX_HOP_CHARS = 64
_FORWARDED_FOR = b"x-forwarded-for"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class ClientAddresses:
    """Resolves the client address of a request (see the module docstring)."""

    def __init__(self, trusted: Iterable[str] = ()) -> None:
        self._trusted: tuple[Network, ...] = tuple(
            ipaddress.ip_network(value, strict=False) for value in trusted
        )

    def _is_trusted(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return address is not None and any(address in net for net in self._trusted)

    def of(self, scope: Scope) -> str:
        """The client's address as text: the peer's, or the first untrusted hop from the
        right of ``X-Forwarded-For`` when the peer is a trusted proxy."""
        client = scope.get("client")
        peer = str(client[0]) if client else UNKNOWN
        if not self._trusted or not self._is_trusted(_address(peer)):
            return peer
        hops = [
            hop.strip()
            for name, value in scope.get("headers", ())
            if name == _FORWARDED_FOR
            for hop in value.decode("latin-1").split(",")
        ]
        found = peer
        for hop in reversed(hops):
            if not hop:
                continue
            address = _address(hop)
            found = str(address) if address is not None else hop[:MAX_HOP_CHARS]
            if not self._is_trusted(address):
                break
        return found


__all__ = ["UNKNOWN", "ClientAddresses"]
