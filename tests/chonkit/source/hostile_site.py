"""A web site that attacks the server fetching it: compression bombs, bodies that trickle in a byte at a time,
sitemaps of a hundred thousand URLs. A real HTTP server on a loopback address, as ``tests/support/web_site.py``,
with the few things that one cannot do: any ``Content-Encoding`` header on any bytes, and bodies sent slowly.
"""

from __future__ import annotations

import functools
import gzip
import threading
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Route:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    send_length: bool = True
    """``False``: no Content-Length, the body ends when the connection closes (HTTP/1.0)."""
    trickle_seconds: float = 0.0
    """Pause after each byte of the body: a page that takes ``len(body) * trickle_seconds`` to arrive."""


class HostileSite:
    """Routes by path (with query); anything not set is a 404. Every request's path is recorded."""

    def __init__(self, host: str, port: int, closing: threading.Event) -> None:
        self.host = host
        self.port = port
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self.accept_encodings: list[str] = []
        self._closing = closing

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def set(self, path: str, route: Route) -> None:
        self.routes[path] = route

    def html(self, path: str, body: str, *, title: str = "", **options: Any) -> None:
        head = f"<title>{title}</title>" if title else ""
        page = f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode()
        self.routes[path] = Route(page, **options)

    def requested(self, path: str) -> int:
        return self.requests.count(path)

    @property
    def closing(self) -> bool:
        return self._closing.is_set()


@contextmanager
def hostile_site(host: str = "127.0.0.1") -> Iterator[HostileSite]:
    """The site on ``host`` (an ephemeral port), until the block ends; trickling answers stop then too."""
    closing = threading.Event()
    site: HostileSite

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requests.append(self.path)
            site.accept_encodings.append(self.headers.get("Accept-Encoding", ""))
            route = site.routes.get(self.path) or Route(b"not found", "text/plain", status=404)
            self.send_response(route.status)
            if route.content_type:
                self.send_header("Content-Type", route.content_type)
            if route.send_length:
                self.send_header("Content-Length", str(len(route.body)))
            for name, value in route.headers.items():
                self.send_header(name, value)
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading
                if not route.trickle_seconds:
                    self.wfile.write(route.body)
                    return
                for byte in route.body:
                    if closing.wait(route.trickle_seconds):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    site = HostileSite(host, server.server_address[1], closing)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        closing.set()
        server.shutdown()
        server.server_close()
        thread.join()


@functools.cache
def gzip_of_zeros(mebibytes: int, *, prefix: bytes = b"") -> bytes:
    """``prefix`` and then ``mebibytes`` MiB of zero bytes, gzipped (about a thousandth of its size)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    parts = [compressor.compress(prefix)]
    parts += [compressor.compress(block) for _ in range(mebibytes)]
    parts.append(compressor.flush())
    return b"".join(parts)


@functools.cache
def stacked_bomb(mebibytes: int) -> bytes:
    """``Content-Encoding: gzip, gzip``: the zeros gzipped twice (1 GiB is 1,827 bytes on the wire)."""
    return gzip.compress(gzip_of_zeros(mebibytes), 9)


def empty_deflate_blocks(count: int) -> bytes:
    """A gzip stream of ``count`` empty stored blocks and no end: bytes on the wire that inflate to nothing."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + b"\x00\x00\x00\xff\xff" * count


def sitemap(locations: Iterable[str], *, inside: str = "") -> bytes:
    """A ``<urlset>`` of ``locations``; ``inside`` is written before the first ``<url>`` (a comment, say)."""
    entries = "".join(f"<url><loc>{location}</loc></url>" for location in locations)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{inside}{entries}</urlset>'
    ).encode()
