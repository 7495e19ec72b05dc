"""The SSRF guard: refused addresses never see a connection attempt; provider calls are not guarded."""

import asyncio
import socket
import ssl
from ipaddress import ip_network

import anyio
import httpx
import pytest
import trustme
from ssrfguard import Policy, SSRFGuardError
from ssrfguard.httpx import AsyncSafeTransport

from app.integrations import webhook
from app.integrations.base import PermanentError
from app.integrations.http import create_http_client, send
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_settings, webhook_secret


@pytest.fixture
def connections(monkeypatch) -> list[tuple[str, int]]:
    """Every TCP connection attempted; one to anything but loopback fails before a packet leaves."""
    attempts: list[tuple[str, int]] = []
    real_connect = anyio.connect_tcp

    async def spy(remote_host, remote_port, **kwargs):
        attempts.append((str(remote_host), remote_port))
        if str(remote_host) not in ("127.0.0.1", "::1"):
            raise OSError(f"test refused to connect to {remote_host}: only loopback is allowed")
        return await real_connect(remote_host, remote_port, **kwargs)

    monkeypatch.setattr(anyio, "connect_tcp", spy)
    return attempts


@pytest.fixture
async def guarded(fake_providers):
    """The shared client with private networks NOT allowed (production's default)."""
    client = create_http_client(make_settings(**(fake_providers.settings | {"webhook_allow_private_networks": False})))
    yield client
    await client.aclose()


def guarded_context(http, url):
    settings = make_settings(webhook_allow_private_networks=False)
    entry = {"id": "hook", "type": "webhook", "url": url, "secret": webhook_secret()}
    return make_context(settings, http, entry)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1, a loopback address"),
        ("localhost", "a loopback address"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1 (IPv4 127.0.0.1), a loopback address"),
        ("10.1.2.3", "10.1.2.3, a private address"),
        ("172.16.0.1", "172.16.0.1, a private address"),
        ("192.168.1.1", "192.168.1.1, a private address"),
        ("169.254.169.254", "169.254.169.254, a cloud metadata address"),
        ("100.64.0.1", "100.64.0.1, a shared (CGNAT) address"),
        ("[fe80::1]", "fe80::1, a link-local address"),
        ("[fd00::1]", "fd00::1, a private address"),
        ("224.0.0.1", "224.0.0.1, a multicast address"),
        ("0.0.0.0", "0.0.0.0, an unspecified address"),
    ],
)
async def test_private_addresses_are_refused_without_a_connection(
    guarded, webhook_receiver, connections, host, expected
):
    url = f"http://{host}:{webhook_receiver.port}/hooks/intake"
    ctx = guarded_context(guarded, url)

    with pytest.raises(PermanentError) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert raised.value.code == "ssrf_refused"
    assert str(raised.value).startswith("webhook URL resolves to ")
    assert expected in str(raised.value)
    assert str(raised.value).endswith("private networks are not allowed")
    assert connections == []
    assert webhook_receiver.requests == []


async def test_a_name_resolving_to_a_private_address_is_refused_after_one_lookup(fake_providers, connections):
    lookups = []

    def resolver(host, port, family=0, type=0, proto=0, flags=0):
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    client = create_http_client(make_settings(webhook_allow_private_networks=False), resolver=resolver)
    async with client:
        with pytest.raises(PermanentError, match=r"resolves to 10\.0\.0\.7, a private address"):
            await send(client, "POST", "https://hooks.internal.test/intake", service="webhook receiver", trusted=False)

    assert lookups == ["hooks.internal.test"]
    assert connections == []


async def test_a_name_resolving_to_public_and_private_addresses_is_refused_whole(connections):
    def resolver(host, port, family=0, type=0, proto=0, flags=0):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    client = create_http_client(make_settings(webhook_allow_private_networks=False), resolver=resolver)
    async with client:
        with pytest.raises(PermanentError) as raised:
            await send(client, "POST", "https://rebind.example.test/", service="webhook receiver", trusted=False)

    assert raised.value.code == "ssrf_refused"
    assert "10.0.0.7" in str(raised.value)
    assert connections == []


async def test_the_guard_connects_to_the_address_it_checked(webhook_receiver, connections):
    """DNS rebinding: a name that would answer differently the second time is looked up once only."""
    answers = iter(["127.0.0.1", "10.0.0.9", "10.0.0.9"])

    def rebinding(host, port, family=0, type=0, proto=0, flags=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    # Loopback permitted for this test only, so that the checked address can be reached at all.
    policy = Policy(allowed_ports=frozenset({webhook_receiver.port}), allowed_networks=(ip_network("127.0.0.0/8"),))
    async with httpx.AsyncClient(transport=AsyncSafeTransport(policy=policy, resolver=rebinding)) as client:
        response = await client.post(f"http://rebind.test:{webhook_receiver.port}/hooks/intake", json={})

    assert response.status_code == 200
    assert connections == [("127.0.0.1", webhook_receiver.port)]
    [delivery] = webhook_receiver.requests
    assert delivery.headers["host"] == f"rebind.test:{webhook_receiver.port}"


async def test_a_request_that_does_not_say_it_is_a_provider_call_is_guarded(guarded, webhook_receiver, connections):
    with pytest.raises(SSRFGuardError):
        await guarded.post(webhook_receiver.url_for())
    assert webhook_receiver.requests == []
    assert connections == []


async def test_provider_calls_reach_loopback_fakes_while_webhooks_are_guarded(guarded, fake_resend, webhook_receiver):
    email = {"from": "a@example.test", "to": ["b@example.test"], "subject": "s", "text": "t"}
    headers = {"Authorization": f"Bearer {credentials.RESEND_API_KEY}", "Idempotency-Key": "k"}

    reply = await send(
        guarded, "POST", f"{fake_resend.url}/emails", service="Resend", trusted=True, json=email, headers=headers
    )
    with pytest.raises(PermanentError, match="loopback"):
        await send(guarded, "POST", webhook_receiver.url_for(), service="webhook receiver", trusted=False)

    assert reply.status == 200
    assert len(fake_resend.emails) == 1
    assert webhook_receiver.requests == []


async def test_allowing_private_networks_reaches_the_receiver_on_loopback(settings, http, webhook_receiver):
    assert settings.webhook_allow_private_networks
    ctx = make_context(
        settings, http, {"id": "hook", "type": "webhook", "url": webhook_receiver.url_for(), "secret": webhook_secret()}
    )

    await webhook.handle(ctx.operation.payload, ctx)

    assert len(webhook_receiver.deliveries()) == 1


@pytest.fixture
async def tls_server():
    """An HTTPS server on 127.0.0.1 with a certificate for hooks.test only; records the SNI it is sent."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.test").configure_cert(server_context)
    names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, context: names.append(name)

    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    async with server:
        yield server.sockets[0].getsockname()[1], client_context, names


def pinned_client(port: int, verify: ssl.SSLContext) -> httpx.AsyncClient:
    """ssrfguard's transport as ours builds it, but allowed to reach loopback, with names resolving to it."""

    def to_loopback(host, port, family=0, type=0, proto=0, flags=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    policy = Policy(allowed_ports=frozenset({port}), allowed_networks=(ip_network("127.0.0.0/8"),))
    return httpx.AsyncClient(transport=AsyncSafeTransport(policy=policy, resolver=to_loopback, verify=verify))


async def test_tls_is_verified_for_the_hostname_while_connecting_to_the_pinned_address(tls_server, connections):
    port, verify, names = tls_server

    async with pinned_client(port, verify) as client:
        response = await client.get(f"https://hooks.test:{port}/")

    assert response.text == "ok"
    assert names == ["hooks.test"]  # SNI is the name, not 127.0.0.1
    assert connections == [("127.0.0.1", port)]


async def test_a_certificate_for_another_name_is_refused(tls_server):
    port, verify, _ = tls_server

    async with pinned_client(port, verify) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED|hostname"):
            await client.get(f"https://other.test:{port}/")
