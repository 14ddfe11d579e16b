#!/usr/bin/python3
"""A userspace TCP fault proxy for the network drills.

    fault_proxy.py LISTEN_PORT TARGET_PORT READY_FILE

Listens on 127.0.0.1:LISTEN_PORT and forwards every connection, both ways,
to 127.0.0.1:TARGET_PORT. Signals inject faults into every connection open
at that moment, in the direction client -> target:

    SIGUSR1  reset: each connection is closed with RST (SO_LINGER 0), at
             once, wherever a message stands
    SIGUSR2  truncate: each connection forwards at most 1000 more bytes
             (cutting a ring message mid-payload), then is reset
    SIGHUP   flip: in each connection, the next read of at least 16 KiB
             (a ring message's payload, nearly all of it) has one bit of its
             middle byte flipped; the connection stays up

Each injection is logged to stdout ("reset 3 connections", "truncated 3
connections after N bytes", "flipping a bit in 3 connections", then
"flipped a bit at byte N of a B-byte read" for each). READY_FILE is
written once listening.
"""

import asyncio
import signal
import socket
import struct
import sys

TRUNCATE_AFTER = 1000
FLIP_READS_OF = 16384


class Link:
    def __init__(self, reader, writer, upstream_reader, upstream_writer):
        self.down = (reader, writer)
        self.up = (upstream_reader, upstream_writer)
        self.budget = None  # bytes still forwarded towards the target
        self.flip = False  # flip a bit in the next large read

    def reset(self):
        for _, w in (self.down, self.up):
            sock = w.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                except OSError:
                    pass
            w.transport.abort()


class Proxy:
    def __init__(self, target_port):
        self.target_port = target_port
        self.links = set()

    async def pipe(self, link, reader, writer, towards_target):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if (towards_target and link.flip and
                        len(data) >= FLIP_READS_OF):
                    link.flip = False
                    damaged = bytearray(data)
                    damaged[len(data) // 2] ^= 0x10
                    data = bytes(damaged)
                    print(f"flipped a bit at byte {len(data) // 2} of a "
                          f"{len(data)}-byte read", flush=True)
                if towards_target and link.budget is not None:
                    data = data[:link.budget]
                    link.budget -= len(data)
                    if data:
                        writer.write(data)
                        await writer.drain()
                    if link.budget <= 0:
                        link.reset()
                        return
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def serve(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        link = Link(reader, writer, up_reader, up_writer)
        self.links.add(link)
        try:
            await asyncio.gather(
                self.pipe(link, reader, up_writer, True),
                self.pipe(link, up_reader, writer, False))
        finally:
            self.links.discard(link)

    def reset_all(self):
        n = len(self.links)
        for link in list(self.links):
            link.reset()
        print(f"reset {n} connections", flush=True)

    def truncate_all(self):
        n = len(self.links)
        for link in list(self.links):
            link.budget = TRUNCATE_AFTER
        print(f"truncated {n} connections after {TRUNCATE_AFTER} bytes",
              flush=True)

    def flip_all(self):
        n = len(self.links)
        for link in list(self.links):
            link.flip = True
        print(f"flipping a bit in {n} connections", flush=True)


async def main():
    listen_port, target_port, ready = int(sys.argv[1]), int(sys.argv[2]), \
        sys.argv[3]
    proxy = Proxy(target_port)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", listen_port)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, proxy.reset_all)
    loop.add_signal_handler(signal.SIGUSR2, proxy.truncate_all)
    loop.add_signal_handler(signal.SIGHUP, proxy.flip_all)
    with open(ready, "w") as f:
        f.write(f"127.0.0.1:{listen_port}\n")
    print(f"forwarding 127.0.0.1:{listen_port} -> 127.0.0.1:{target_port}",
          flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
