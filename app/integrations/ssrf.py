"""The SSRF guard for URLs that admins type in (webhooks): resolve once, check, connect there.

Enforcement is `ssrfguard`'s. Its httpcore network backend resolves a host once per connection,
checks every answer against an IANA-derived table — loopback, RFC 1918 and unique-local,
100.64.0.0/10 (CGNAT, which `ipaddress.is_private` misses), link-local with the cloud metadata
addresses, multicast, reserved, unspecified, and the IPv4 address inside IPv4-mapped, NAT64, 6to4
and Teredo IPv6 addresses — then connects to the very address it checked, so no second lookup
can be steered elsewhere (DNS rebinding). A name that resolves to a public and a private address
at once is refused whole. TLS is httpcore's own code, started with the URL's hostname, so SNI and
certificate verification are for the name, never for the pinned address. A literal address in
the URL is refused before any socket exists.

This module decides the policy and turns a refusal into a `PermanentError` a person can act on.
"""

from ipaddress import IPv4Address, IPv6Address, ip_address

import httpx
from ssrfguard import DEFAULT_DENIED, BlockedAddressError, BlockedURLError, Policy, Resolver, SSRFGuardError
from ssrfguard.httpx import AsyncSafeTransport

from app.integrations.base import PermanentError

#: Webhook receivers listen on any port (8443, 9000, ...); what SSRF is about is the address.
#: Credentials in the URL (https://user:pass@host/) are a common way receivers authenticate.
POLICY = Policy(allowed_ports=frozenset(range(1, 65536)), allow_userinfo=True)

#: What a person calls the blocks of ssrfguard's table, by the table's own block names.
_KINDS = {
    "Loopback": "a loopback address",
    "Loopback Address": "a loopback address",
    "Private-Use": "a private address",
    "Unique-Local": "a private address",
    "Shared Address Space": "a shared (CGNAT) address",
    "Link Local": "a link-local address",
    "Link-Local Unicast": "a link-local address",
    "Multicast": "a multicast address",
    "This network": "an unspecified address",
    "This host on this network": "an unspecified address",
    "Unspecified Address": "an unspecified address",
}


def guarded_transport(*, limits: httpx.Limits, resolver: Resolver | None = None) -> httpx.AsyncBaseTransport:
    """A connection pool that only ever connects to public addresses it checked itself."""
    return AsyncSafeTransport(policy=POLICY, limits=limits, resolver=resolver)


def refusal(error: SSRFGuardError) -> PermanentError:
    """The permanent error for a URL or address the guard refused."""
    address = _refused_address(error)
    if address is not None:
        message = f"webhook URL resolves to {_describe(address)}; private networks are not allowed"
    else:
        message = f"webhook URL is not allowed: {getattr(error, 'reason', str(error))}"
    return PermanentError(message[:500], code="ssrf_refused")


def _refused_address(error: SSRFGuardError) -> IPv4Address | IPv6Address | None:
    if isinstance(error, BlockedAddressError):
        host = error.address
    elif isinstance(error, BlockedURLError):
        try:
            host = httpx.URL(error.url).host
        except httpx.InvalidURL:
            return None
    else:
        return None
    try:
        return ip_address(host)
    except ValueError:
        return None


def _describe(address: IPv4Address | IPv6Address) -> str:
    """`127.0.0.1, a loopback address`; a wrapped IPv4 address is named too."""
    verdict = DEFAULT_DENIED.classify(address)
    block = verdict.block
    if block is None:
        return f"{address}, which is not a public address"
    kind = _KINDS.get(block.name)
    if kind is None:
        kind = (
            "a cloud metadata address"
            if block.name.startswith("Cloud metadata")
            else f"a reserved address ({block.name})"
        )
    text = str(address)
    if isinstance(address, IPv6Address) and address.ipv4_mapped:
        text = f"::ffff:{address.ipv4_mapped}"  # as written; older Pythons print ::ffff:7f00:1
    if verdict.chain:
        return f"{text} (IPv4 {verdict.chain[-1][1]}), {kind}"
    return f"{text}, {kind}"
