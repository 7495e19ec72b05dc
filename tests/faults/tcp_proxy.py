"""A TCP proxy on 127.0.0.1 that a test can cut: the database going away, as the client sees it.

    async with TcpProxy("127.0.0.1", 5432) as proxy:
        url = proxy.rewrite(pg_url)          # point the app or the worker at the proxy
        await proxy.cut()                    # drop every connection, refuse new ones
        await proxy.restore()                # accept again
        proxy.cut_after(b"COMMIT")           # drop a connection once it sends this (after forwarding it)
        proxy.freeze(); proxy.thaw()         # a server that accepts and then never answers, and back

`cut()` resets the client side of every open connection and closes the listening socket, so a
new connect is refused at once (ECONNREFUSED), as when the server is down; `restore()` listens
again on the same port.
"""

import asyncio
import contextlib
import socket

from sqlalchemy.engine import make_url


class TcpProxy:
    """Forwards 127.0.0.1:<port> to an upstream address until told to cut."""

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.port = _free_port()
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._trigger: tuple[bytes, bool] | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._stranded: set[asyncio.Task] = set()
        self.triggered = asyncio.Event()

    async def __aenter__(self) -> "TcpProxy":
        await self.restore()
        return self

    async def __aexit__(self, *_exc) -> None:
        await self.cut()

    def rewrite(self, url: str) -> str:
        """`url` with its host and port replaced by the proxy's."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    @property
    def open_connections(self) -> int:
        """Client connections currently forwarded."""
        return len(self._writers) // 2

    async def restore(self) -> None:
        """Listen (again) and forward every new connection."""
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)

    async def cut(self) -> None:
        """Stop listening and reset every forwarded connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            _reset(writer)
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        self._writers.clear()

    def freeze(self) -> None:
        """Keep every connection open and accept new ones, but forward nothing: a hung server."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again after `freeze`."""
        self._flowing.set()

    def strand(self) -> None:
        """Leave every open connection hanging forever (open, forwarding nothing); new ones work.

        A network partition that healed: the server has long forgotten those connections, and
        the client only finds out if it stops waiting on them.
        """
        self._stranded.update(self._pipes)

    def cut_after(self, marker: bytes, *, forward: bool = True) -> None:
        """Reset the next connection whose client sends `marker`: after forwarding that chunk or instead of it."""
        self._trigger = (marker, forward)
        self.triggered.clear()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        await self._flowing.wait()
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _reset(client_writer)
            return
        self._writers.update((client_writer, server_writer))
        pair = (client_writer, server_writer)
        upstream = asyncio.create_task(self._pipe(client_reader, server_writer, pair, watch=True))
        downstream = asyncio.create_task(self._pipe(server_reader, client_writer, pair, watch=False))
        self._pipes.update((upstream, downstream))
        upstream.add_done_callback(self._pipes.discard)
        downstream.add_done_callback(self._pipes.discard)

    async def _pipe(self, reader, writer, pair, *, watch: bool) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()
                if asyncio.current_task() in self._stranded:
                    await asyncio.Event().wait()  # until cut() cancels it
                if watch and self._trigger and self._trigger[0] in data:
                    forward, self._trigger = self._trigger[1], None
                    _reset(pair[0])  # the client hears nothing more, whatever the server answers
                    self.triggered.set()
                    if forward:
                        writer.write(data)
                        await writer.drain()
                        await asyncio.sleep(0.2)  # let the server read and act on it before its end closes
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for end in pair:
                _reset(end)
                self._writers.discard(end)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a RST, as a dead peer or a cut cable does, rather than a polite FIN."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(Exception):
        writer.transport.abort()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
