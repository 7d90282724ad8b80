"""The ``hindsight`` memory's worker's database: its private network and its PostgreSQL.

Loaded by the worker (``worker.py``) from its file, in Hindsight's environment: the standard
library only (and pg0 and asyncpg, which that environment holds).

The memory starts the worker in a user and a network namespace of its own (``unshare --user
--net``): the worker brings up its loopback, which no other process shares, and pg0's
PostgreSQL listens there, on a port nothing else can reach, and on a Unix socket in the
worker's folder (0700). Its data, pg0's unpacked binaries and pg0's temporary files (the
password file it gives initdb) are in that folder too; the roles' password is drawn for the
bank and known to the worker alone.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
import subprocess
from pathlib import Path

PG_NAME = "hindsight"
PG_USER = PG_DATABASE = "hindsight"
# The loopback is the worker's network namespace's, which no other process shares: a fixed port
# no one else can connect to or take first
PG_PORT = 5432
SOCKET_DIR = "run"  # PostgreSQL's Unix socket, beside ``data`` in the worker's folder
# The memory's preflight runs the worker with this argument: it answers "private" once its
# namespaces are up (``hindsight.check_private``)
NETWORK_CHECK = "--network-check"


# ------------------------------------------------------------------------ isolation

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def private_network() -> None:
    """Bring up the loopback of the network namespace the memory started this process in.

    Refuses to go on in a namespace with another interface (one shared with the machine): there
    PostgreSQL's port would be open to every local user. The capabilities ``unshare
    --keep-caps`` passed on for this end here: pg0 and PostgreSQL start without them."""
    import ctypes
    import fcntl

    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        raise RuntimeError(
            f"Hindsight's worker must run in a network namespace of its own (found the "
            f"interfaces {', '.join(names)}): the memory starts it under unshare --net"
        )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
    ctypes.CDLL(None, use_errno=True).prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


# ---------------------------------------------------------------------- PostgreSQL


def draw_password() -> str:
    """A random password for pg0's command line and an SQL literal: hex, since a base64 one may
    begin with '-', which pg0's parser takes for an option ("unexpected argument '-H' found":
    one start in 64 failed)."""
    return secrets.token_hex(32)


class Server:
    """pg0's PostgreSQL with its data, its socket, pg0's unpacked binaries and temporary files
    under ``folder``, on the private loopback, its roles' password drawn for this bank."""

    def __init__(self, folder: Path):
        import pg0

        self.binary = Path(pg0.__file__).parent / "bin" / "pg0"
        self.folder = folder
        self.home = folder / "pg0"  # pg0 unpacks PostgreSQL into $HOME/.pg0
        self.tmp = folder / "tmp"  # pg0's initdb password file (.pgpass) and its like
        self.data = folder / "data"
        self.port = PG_PORT
        self.password = draw_password()  # known to this process only

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        env = {
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        return subprocess.run(
            [str(self.binary), *args], env=env, capture_output=True, text=True, timeout=120
        )

    def url(self, password: str | None = None) -> str:
        return (
            f"postgresql://{PG_USER}:{password or self.password}@127.0.0.1:{self.port}/"
            f"{PG_DATABASE}"
        )

    async def start(self) -> str:
        """Start PostgreSQL; its URL. pg0 takes the password on its command line (and hands
        it to psql on its own), where ``ps`` shows it to every local user: it gets one used
        once, replaced by the bank's before anything else connects."""
        for path in (self.home, self.tmp, self.folder / SOCKET_DIR):
            path.mkdir(parents=True, exist_ok=True)
        once = draw_password()
        done = self._run(
            "start", "--name", PG_NAME, "--port", str(self.port), "--data-dir", str(self.data),
            "-u", PG_USER, "-P", once, "-n", PG_DATABASE,
            # relative to the data folder: an absolute path may pass a socket's 107 bytes
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories=../{SOCKET_DIR}",
            "-c", "unix_socket_permissions=0700",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
        )  # fmt: skip
        if done.returncode != 0:
            said = (done.stderr or done.stdout).replace(once, "***")
            raise RuntimeError(f"PostgreSQL (pg0) did not start: {said}")
        import asyncpg

        conn = await asyncpg.connect(self.url(once))
        try:  # pg0's own role and the superuser initdb made, both with pg0's password
            for role in (PG_USER, "postgres"):
                await conn.execute(f"ALTER ROLE \"{role}\" PASSWORD '{self.password}'")
        finally:
            await conn.close()
        return self.url()

    def scrub(self, text: str) -> str:
        """``text`` without the bank's password."""
        return text.replace(self.password, "***")

    def stop(self) -> None:
        self._run("stop", "--name", PG_NAME)
