"""Failed KV logins over TLS count against the real client's address, not the relay's.

kv_tls_lockout_by_client.py PORT CA_FILE: five wrong passwords for `admin` over KV TLS from
127.0.0.2 lock admin out from there (the right password is refused too), while a TLS client on
127.0.0.1 still logs in. SASL PLAIN frames over Python's ssl module: the standard library only.
"""
import socket
import ssl
import struct
import sys

SASL_AUTH = 0x21
SUCCESS = 0x00
AUTH_ERROR = 0x20


def plain_login(port, ca_file, source, user, password):
    """The status of one SASL PLAIN over TLS from `source`."""
    context = ssl.create_default_context(cafile=ca_file)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        key = b"PLAIN"
        value = b"\0" + user.encode() + b"\0" + password.encode()
        header = struct.pack(">BBHBBHIIQ", 0x80, SASL_AUTH, len(key), 0, 0, 0,
                             len(key) + len(value), 1, 0)
        tls.sendall(header + key + value)
        reply = b""
        while len(reply) < 24:
            chunk = tls.recv(24 - len(reply))
            if not chunk:
                raise RuntimeError("connection closed before the reply")
            reply += chunk
        (_, _, _, _, _, status, body_length, _, _) = struct.unpack(">BBHBBHIIQ", reply)
        remaining = body_length
        while remaining:
            remaining -= len(tls.recv(remaining))
        return status


def main():
    port, ca_file = int(sys.argv[1]), sys.argv[2]
    assert plain_login(port, ca_file, "127.0.0.1", "admin", "secret") == SUCCESS
    for _ in range(5):
        assert plain_login(port, ca_file, "127.0.0.2", "admin", "wrong") == AUTH_ERROR
    locked = plain_login(port, ca_file, "127.0.0.2", "admin", "secret")
    assert locked == AUTH_ERROR, f"the locked-out client got status {locked:#x}"
    other = plain_login(port, ca_file, "127.0.0.1", "admin", "secret")
    assert other == SUCCESS, f"a client on another address got status {other:#x}"
    print("ok: KV TLS logins are counted by the client's own address")


main()
