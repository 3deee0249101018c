"""A real HTTP server on a loopback address whose pages a test sets, changes and removes while it runs."""

from __future__ import annotations

import gzip
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Response:
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    send_length: bool = True
    """``False``: no Content-Length, the body ends when the connection closes (HTTP/1.0)."""


@dataclass
class Request:
    path: str
    host: str
    user_agent: str


class LocalSite:
    """Pages by path (with query); anything not set is a 404. Every request is recorded."""

    def __init__(self, host: str, port: int, *, scheme: str = "http") -> None:
        self.host = host
        self.port = port
        self.scheme = scheme
        self.pages: dict[str, Response] = {}
        self.requests: list[Request] = []

    def url(self, path: str = "/", *, host: str | None = None) -> str:
        return f"{self.scheme}://{host or self.host}:{self.port}{path}"

    def html(self, path: str, body: str, *, title: str = "") -> None:
        head = f"<title>{title}</title>" if title else ""
        self.pages[path] = Response(f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode())

    def set(self, path: str, body: bytes, content_type: str, **options: Any) -> None:
        self.pages[path] = Response(body, content_type, **options)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.pages[path] = Response(status=status, headers={"Location": location})

    def gzip(self, path: str, body: bytes) -> None:
        self.pages[path] = Response(gzip.compress(body), "application/gzip")

    def requested(self, path: str) -> int:
        return sum(1 for request in self.requests if request.path == path)


@contextmanager
def serve_site(host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> Iterator[LocalSite]:
    """The site on ``host`` (an ephemeral port); over HTTPS with ``tls``, a server-side context with its certificate."""
    site: LocalSite

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requests.append(Request(self.path, self.headers.get("Host", ""), self.headers.get("User-Agent", "")))
            response = site.pages.get(self.path) or Response(b"not found", "text/plain", status=404)
            self.send_response(response.status)
            if response.content_type:
                self.send_header("Content-Type", response.content_type)
            if response.send_length:
                self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading (a page too large)
                self.wfile.write(response.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    site = LocalSite(host, server.server_address[1], scheme="https" if tls else "http")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
