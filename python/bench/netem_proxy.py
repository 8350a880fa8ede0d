#!/usr/bin/env python3
"""A TCP proxy that emulates a network link between a client and a server on
127.0.0.1: a one-way delay in each direction (half the round trip) and a rate limit
shared by every connection (one FIFO link per direction).

Used by bench_remote.py (workload W10) because this kernel has no ``sch_netem``
(``CONFIG_NET_SCH_NETEM`` is not set and modules cannot be loaded), so ``tc qdisc ...
netem delay`` is refused; ``tbf`` could limit the rate but nothing in the kernel here
can add delay.

Model, per direction: a chunk read from one side at time ``t`` enters a FIFO link
that is free again at ``free``; it leaves the link at ``max(t, free) + len / rate``
and is written to the other side ``delay`` later. Every connection's chunks share the
direction's link (so N connections split the bandwidth, as on a real link). A new
connection pays one extra round trip before its first request byte arrives (the TCP
handshake). Each connection buffers at most ``--window`` bytes per direction before
it stops reading (backpressure to the sender, like a TCP receive window): one
connection can carry at most ``window / rtt`` bytes/s, 400 MiB/s with the defaults.
Not modelled: slow start, loss, per-packet jitter.

    python netem_proxy.py --listen 7001 --upstream 7000 --rtt-ms 10 --rate-mbit 1000

Prints ``ready <port>`` on stdout once it listens (``--listen 0`` picks a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys

CHUNK = 256 * 1024


class Link:
    """One direction of the emulated link: a FIFO at ``rate`` bytes/s, then ``delay`` s."""

    def __init__(self, rate: float, delay: float) -> None:
        self.rate = rate
        self.delay = delay
        self.free = 0.0

    def deliver_at(self, now: float, n: int) -> float:
        start = max(now, self.free)
        self.free = start + (n / self.rate if self.rate > 0 else 0.0)
        return self.free + self.delay


async def pipe(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    link: Link,
    window: int,
    first_extra: float,
) -> None:
    loop = asyncio.get_running_loop()
    queue: collections.deque[tuple[float, bytes]] = collections.deque()
    buffered = 0
    room = asyncio.Event()
    room.set()
    ready = asyncio.Event()
    done = False

    async def reader() -> None:
        nonlocal buffered, done
        extra = first_extra
        try:
            while True:
                while buffered >= window:
                    room.clear()
                    await room.wait()
                data = await src.read(CHUNK)
                if not data:
                    break
                queue.append((link.deliver_at(loop.time(), len(data)) + extra, data))
                extra = 0.0
                buffered += len(data)
                ready.set()
        except (ConnectionError, OSError):
            pass
        finally:
            done = True
            ready.set()

    async def writer() -> None:
        nonlocal buffered
        try:
            while True:
                if not queue:
                    if done:
                        break
                    ready.clear()
                    await ready.wait()
                    continue
                at, data = queue.popleft()
                wait = at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                dst.write(data)
                await dst.drain()
                buffered -= len(data)
                room.set()
            if dst.can_write_eof():
                dst.write_eof()
        except (ConnectionError, OSError):
            pass

    read_task = asyncio.ensure_future(reader())
    try:
        await writer()
    finally:
        read_task.cancel()


async def serve(args: argparse.Namespace) -> None:
    rate = args.rate_mbit * 1e6 / 8
    delay = args.rtt_ms / 1000 / 2
    up, down = Link(rate, delay), Link(rate, delay)

    async def handle(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", args.upstream)
        except OSError:
            cwriter.close()
            return
        try:
            await asyncio.gather(
                pipe(creader, swriter, up, args.window, 2 * delay),
                pipe(sreader, cwriter, down, args.window, 0.0),
            )
        finally:
            for w in (cwriter, swriter):
                w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", args.listen, backlog=512)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    p.add_argument("--upstream", type=int, required=True, help="server port on 127.0.0.1")
    p.add_argument("--rtt-ms", type=float, default=10.0, help="round trip added (ms)")
    p.add_argument("--rate-mbit", type=float, default=1000.0, help="per-direction link rate (0: none)")
    p.add_argument("--window", type=int, default=4 << 20, help="bytes buffered per connection and direction")
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
