"""Hold idle TCP connections to a server: ``python idle_connections.py HOST PORT COUNT INDEX``.

Raises its own soft ``RLIMIT_NOFILE`` to the hard limit, opens ``COUNT`` connections from
source addresses ``127.<INDEX+1>.x.y`` (each source address has its own ephemeral ports, so
tens of thousands fit), sends nothing on them, and prints ``connected N`` once every connect
has finished (or after 60 s), and exits when its stdin closes.
"""

from __future__ import annotations

import errno
import resource
import selectors
import socket
import sys
import time


def main() -> int:
    host, port, count, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    pending: list[socket.socket] = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.bind((f"127.{index + 1}.{(i // 250) % 250 + 1}.{i % 250 + 2}", 0))
        if sock.connect_ex((host, port)) not in (0, errno.EINPROGRESS):
            sock.close()
            continue
        pending.append(sock)
    selector = selectors.DefaultSelector()
    for sock in pending:
        selector.register(sock, selectors.EVENT_WRITE)
    connected: list[socket.socket] = []
    deadline = time.monotonic() + 60
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=1):
            sock = key.fileobj  # type: ignore[assignment]
            selector.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                connected.append(sock)
    print(f"connected {len(connected)}", flush=True)
    sys.stdin.read()  # hold them until told
    return 0


if __name__ == "__main__":
    sys.exit(main())
