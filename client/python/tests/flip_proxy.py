"""A TCP proxy on 127.0.0.1 that damages one byte on its way back to the
client: the first time ``pattern`` passes from the server, its first byte
gets one bit flipped. Everything else passes unchanged, so the damage lands
in a message's payload and only the receiver's checksum can see it."""

import socket
import threading


class FlipProxy:
    def __init__(self, target_port, pattern, flips=1):
        self.target_port = target_port
        self.pattern = pattern
        self.flips_left = flips
        self.flipped = 0
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True),
                             daemon=True).start()

    def _pump(self, src, dst, from_server):
        tail = b""
        while True:
            try:
                block = src.recv(1 << 16)
            except OSError:
                block = b""
            if not block:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            if from_server:
                block = self._maybe_flip(tail, block)
                tail = (tail + block)[-len(self.pattern):]
            try:
                dst.sendall(block)
            except OSError:
                return

    def _maybe_flip(self, tail, block):
        with self._lock:
            if self.flips_left <= 0:
                return block
            at = (tail + block).find(self.pattern)
            # Only a match that begins inside this block (the tail was
            # already sent).
            if at < len(tail):
                return block
            i = at - len(tail)
            self.flips_left -= 1
            self.flipped += 1
            return block[:i] + bytes([block[i] ^ 0x01]) + block[i + 1:]

    def close(self):
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
