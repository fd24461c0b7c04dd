#!/usr/bin/python3
"""A client of a secured Memcached (spec.security), with Debian's python3-pymemcache.

It presents the client certificate of a mounted Secret (tls.crt, tls.key;
ca.crt checks the server) and authenticates each connection with the
ASCII protocol's "set auth", which memcached requires before anything else
when the Memcached has spec.security.auth. pymemcache has no setting for
that, so the connection class sends it right after connecting, including
after a reconnect.

    python3 cache_client.py --server app-cache.cache.svc:11211 \\
        --tls-dir /etc/cache-client --auth-file /etc/cache-auth/auth-file set greeting hello
    python3 cache_client.py ... get greeting

With a Stable cache, pass each server of status.serverList (pod names,
each verified as itself). With an Ephemeral one the list holds pod
addresses, which no certificate names: add --server-name with the
Service's name, the name each of them is verified as
(docs/security.md#host-names).

test/memcached runs it against memcached started with the operator's
arguments (docs/security.md).
"""

import argparse
import ssl
import sys

from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient


def authenticating(user, password):
    """A pymemcache Client class that authenticates every new connection."""
    token = f"{user} {password}".encode()

    class AuthenticatingClient(Client):
        def _connect(self):
            super()._connect()
            self.sock.sendall(b"set auth 0 0 %d\r\n%s\r\n" % (len(token), token))
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = self.sock.recv(1)
                if not chunk:
                    break
                reply += chunk
            if reply != b"STORED\r\n":
                self.close()
                raise PermissionError(f"memcached refused user {user}: {reply!r}")

    return AuthenticatingClient


class VerifiedAs:
    """An ssl context that verifies one host name for every server.

    pymemcache verifies the host it dials; an Ephemeral cache's clients
    dial pod addresses and verify the Service's name instead.
    """

    def __init__(self, context, server_name):
        self.context, self.server_name = context, server_name

    def wrap_socket(self, sock, server_hostname=None, **kwargs):
        return self.context.wrap_socket(sock, server_hostname=self.server_name, **kwargs)


def connect(servers, tls_dir=None, auth_file=None, server_name=None):
    """A HashClient over servers (host:port), as the flags say."""
    tls_context = None
    if tls_dir:
        tls_context = ssl.create_default_context(cafile=f"{tls_dir}/ca.crt")
        tls_context.load_cert_chain(f"{tls_dir}/tls.crt", f"{tls_dir}/tls.key")
        if server_name:
            tls_context = VerifiedAs(tls_context, server_name)
    cls = HashClient
    if auth_file:
        with open(auth_file, encoding="utf-8") as f:
            user, _, password = f.readline().strip().partition(":")
        cls = type("AuthenticatingHashClient", (HashClient,), {"client_class": authenticating(user, password)})
    pairs = [(host, int(port)) for host, _, port in (s.rpartition(":") for s in servers)]
    # ignore_exc=False: a refused certificate or password is an error, not a miss.
    return cls(pairs, tls_context=tls_context, connect_timeout=5, timeout=5, ignore_exc=False, retry_attempts=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", action="append", required=True, help="host:port; repeat for each server (status.serverList)")
    p.add_argument("--tls-dir", help="a mounted client certificate Secret: tls.crt, tls.key, ca.crt")
    p.add_argument("--auth-file", help="a user:password line")
    p.add_argument("--server-name", help="verify this name for every server (an Ephemeral cache's Service name) instead of each server's host")
    p.add_argument("command", choices=["set", "get"])
    p.add_argument("key")
    p.add_argument("value", nargs="?")
    args = p.parse_args()
    client = connect(args.server, args.tls_dir, args.auth_file, args.server_name)
    if args.command == "set":
        if not client.set(args.key, args.value or "", noreply=False):
            sys.exit(f"set {args.key}: not stored")
        print("STORED")
        return
    value = client.get(args.key)
    if value is None:
        sys.exit(1)
    print(value.decode())


if __name__ == "__main__":
    main()
