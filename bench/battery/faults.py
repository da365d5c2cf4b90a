"""S3 faults: a small HTTP proxy in front of moto's server that spoils a share of the answers to PUT, DELETE
(and the multi-object DELETE POST) and GET requests:

* ``fail``: the request never reaches moto; the client gets ``503 SlowDown`` (what S3 answers under load);
* ``drop``: moto carries the request out, then the connection closes without an answer;
* ``lie``: moto carries it out, the client gets ``500 InternalError`` (it did happen, the client thinks not).

Each case applies a real plan (the crash section's) to a checkpoint in moto through the proxy; when the apply
fails, the documented recovery runs through the same faulty proxy (`ckptfix apply --resume`, then `ckptfix
undo` if resuming cannot finish), a few times. Clean = the checkpoint ends sha256-identical to the original or
to the finished result. Lost objects (a file of both missing) and half-written ones (bytes of neither, or a
stray object) are counted: they must be 0."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import random
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.battery.report import Section

SPOILED = ("PUT", "DELETE", "GET", "POST")


class FaultProxy:
    def __init__(
        self, upstream: str, share: float, seed: int = 16, script: list[tuple[str, str]] | None = None
    ) -> None:
        """``script``: faults to inject, in order, on the next requests of those methods (then ``share``)."""
        up = urlsplit(upstream)
        self.host, self.port = up.hostname or "127.0.0.1", up.port or 80
        self.share = share
        self.rnd = random.Random(seed)
        self.lock = threading.Lock()
        self.enabled = True
        self.injected: dict[str, int] = {"fail": 0, "drop": 0, "lie": 0}
        self.requests = 0
        self.script = list(script or [])
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy.choose(self.command)
                if fault == "fail":
                    self._answer(503, b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>")
                    return
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if fault == "drop":
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "lie":
                    self._answer(500, b"<Error><Code>InternalError</Code><Message>injected</Message></Error>")
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_DELETE = do_POST = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def choose(self, method: str) -> str | None:
        with self.lock:
            self.requests += 1
            if self.script and self.script[0][0] == method:
                fault = self.script.pop(0)[1]
                self.injected[fault] += 1
                return fault
            if not self.enabled or method not in SPOILED or self.rnd.random() >= self.share:
                return None
            fault = self.rnd.choice(("fail", "drop", "lie"))
            self.injected[fault] += 1
            return fault

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


FAULT_PLANS = ("async_gap", "rollback_to_3", "state_rebuild_rocksdb", "metadata_truncated", "migrate_provider_to_hdfs")


def run(moto: Any, runs: int, share: float, tmp: Path) -> Section:
    from bench.battery.crash import _cli, plans
    from ckptfix.repair import engine
    from ckptfix.storage import Location

    section = Section(f"S3 faults: {share:.0%} of PUT/DELETE/GET spoiled")
    proxy = FaultProxy(moto.endpoint, share)
    lost = half = recovered = applied_first_time = unrecovered = 0
    started = time.monotonic()
    table = plans()
    try:
        for i in range(runs):
            name = FAULT_PLANS[i % len(FAULT_PLANS)]
            setup, make_plan = table[name]
            pristine = setup(tmp / f"f{i}")
            plan = make_plan(pristine)
            key = f"faults/{uuid.uuid4().hex[:8]}-{i}"
            url = moto.upload(pristine, key)
            before = moto.tree(url)
            # the finished result, computed without faults on a copy
            ref_url = moto.upload(pristine, f"{key}-reference")
            ref = Location(ref_url, moto.options())
            engine.apply(
                dataclasses.replace(plan, checkpoint=ref.url),
                ref,
                Location(ref_url + "/_ckptfix", moto.options()),
                force=True,
            )
            after = moto.tree(ref_url)
            faulty = moto.options(proxy.endpoint, config_kwargs={"retries": {"max_attempts": 6, "mode": "standard"}})
            loc = Location(url, faulty)
            error = None
            try:
                engine.apply(
                    dataclasses.replace(plan, checkpoint=loc.url), loc, Location(url + "/_ckptfix", faulty), force=True
                )
                applied_first_time += 1
            except Exception as exc:  # noqa: BLE001 - any failure is what recovery is for
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
            steps: list[str] = []
            if error is not None:
                cli_opts = [
                    "--endpoint-url",
                    proxy.endpoint,
                    "-o",
                    "use_listings_cache=false",
                    "-o",
                    "skip_instance_cache=true",
                ]
                for command in (
                    ["apply", "--resume", url],
                    ["apply", "--resume", url],
                    ["undo", url, "--force"],
                    ["undo", url, "--force"],
                ):
                    if moto.tree(url) in (before, after):
                        break
                    rc, out = _cli([*command, *cli_opts])
                    steps.append(f"{' '.join(command[:2])}: exit {rc}")
                final = moto.tree(url)
                if final in (before, after):
                    recovered += 1
                else:
                    unrecovered += 1
            final = moto.tree(url)
            closest = (
                after
                if len(set(final.items()) ^ set(after.items())) <= len(set(final.items()) ^ set(before.items()))
                else before
            )
            n_lost = sum(1 for k in closest if k not in final)
            n_half = sum(1 for k, h in final.items() if closest.get(k) != h)
            lost += n_lost
            half += n_half
            section.case(
                final in (before, after),
                {
                    "plan": name,
                    "run": i,
                    "apply": error or "ok",
                    "recovery": steps,
                    "lost": n_lost,
                    "half_written": n_half,
                },
            )
    finally:
        proxy.close()
    section.figures = {
        "injected": dict(proxy.injected),
        "injected_total": sum(proxy.injected.values()),
        "requests_through_proxy": proxy.requests,
        "applied_despite_faults": applied_first_time,
        "recovered_by_resume_or_undo": recovered,
        "not_recovered": unrecovered,
        "lost_objects": lost,
        "half_written_objects": half,
        "seconds": round(time.monotonic() - started, 1),
    }
    return section
