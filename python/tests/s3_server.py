"""A real S3-compatible server on 127.0.0.1 for the remote tests: moto in server
mode in the test process, behind a small HTTP proxy that counts the requests zring
sends (coalescing, cache hits) and can answer 500 or drop connections (retries).
Objects are uploaded with boto3. Nothing here needs cloud credentials or any
address beyond 127.0.0.1.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUCKET = "zring-test"


class Proxy:
    """Forwards HTTP requests to moto, recording each; fails or drops on demand."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.requests: list[tuple[str, str, str]] = []
        self.fail_next = 0
        # The status and S3 error code of an injected failure.
        self.fail_with = (500, "InternalError")
        self.drop_next = 0
        # Only requests of this method (say "PUT") fail or drop, when set.
        self.only: str | None = None
        # Seconds to wait before forwarding each ranged GET (a slow download).
        self.delay = 0.0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                rng = self.headers.get("Range", "")
                with proxy.lock:
                    proxy.requests.append((self.command, self.path, rng))
                    chosen = proxy.only is None or proxy.only == self.command
                    drop = chosen and proxy.drop_next > 0
                    fail = chosen and not drop and proxy.fail_next > 0
                    proxy.drop_next -= int(drop)
                    proxy.fail_next -= int(fail)
                if rng and self.command == "GET" and proxy.delay:
                    time.sleep(proxy.delay)
                if drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if fail:
                    status, code = proxy.fail_with
                    body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length", "0") or 0)
                payload = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                # A HEAD's body is empty: its length is the object's, upstream's.
                length_out = resp.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length_out)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = _forward
            do_HEAD = _forward
            # Uploads: PUT (objects and parts), POST (multipart create and
            # complete), DELETE (aborts).
            do_PUT = _forward
            do_POST = _forward
            do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def gets(self, key: str | None = None) -> list[tuple[str, str, str]]:
        with self.lock:
            return [r for r in self.requests if r[0] == "GET" and (key is None or key in r[1])]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()

    def stop(self) -> None:
        self.server.shutdown()


class S3:
    def __init__(self, moto_url: str, proxy: Proxy) -> None:
        self.proxy = proxy
        self.client = boto3.client(
            "s3",
            endpoint_url=moto_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)
        return f"s3://{BUCKET}/{key}"

    def put_file(self, key: str, path: Path) -> str:
        return self.put(key, path.read_bytes())

    def put_tree(self, prefix: str, root: Path) -> str:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                self.put(f"{prefix}/{p.relative_to(root).as_posix()}", p.read_bytes())
        return f"s3://{BUCKET}/{prefix}"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    proxy = Proxy((host, port))
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    os.environ.pop("ZRING_CACHE_DIR", None)
    try:
        yield S3(f"http://{host}:{port}", proxy)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proxy.stop()
        server.stop()
