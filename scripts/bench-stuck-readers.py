#!/usr/bin/env python3
"""Clients that ask for a long streamed answer and never read it (issue 18).

Starts BIN on a fresh data directory, loads 3,000 documents of 2 KB, then opens N connections
that each ask for `_all_docs?include_docs=true` (6.5 MB) and read nothing. Reports how long
another client waits for `_all_docs?limit=1`, the database and a document, and the node's RSS
and thread count with the stuck clients connected.

    scripts/bench-stuck-readers.py [--clients 600] [BIN]
"""
import argparse, base64, json, os, socket, subprocess, tempfile, time, urllib.request

PORT = 15992
AUTH = "Basic " + base64.b64encode(b"a:b").decode()


def req(method, path, body=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}", data=body, method=method,
        headers={"Authorization": AUTH, "Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=60).read()


def status(pid):
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return int(fields["VmRSS"].split()[0]) // 1024, len(os.listdir(f"/proc/{pid}/task"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=600)
    default_bin = os.path.expanduser(os.environ.get(
        "CARGO_TARGET_DIR", "~/.cache/settee/target")) + "/release/settee"
    parser.add_argument("bin", nargs="?", default=default_bin)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        node = subprocess.Popen(
            [args.bin, "serve", "--data-dir", data, "--http-addr", f"127.0.0.1:{PORT}",
             "--kv-addr", "127.0.0.1:0", "--mgmt-addr", "127.0.0.1:0", "--admin", "a:b"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    req("GET", "/_up")
                    break
                except OSError:
                    time.sleep(0.1)
            req("PUT", "/big")
            docs = [{"_id": f"d{i:06}", "pad": "x" * 2000} for i in range(3000)]
            for start in range(0, len(docs), 500):
                req("POST", "/big/_bulk_docs",
                    json.dumps({"docs": docs[start:start + 500]}).encode())
            print("rss_mb=%d threads=%d (no stuck client)" % status(node.pid))
            stuck = []
            for _ in range(args.clients):
                sock = socket.create_connection(("127.0.0.1", PORT))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(("GET /big/_all_docs?include_docs=true HTTP/1.1\r\nHost: x\r\n"
                              f"Authorization: {AUTH}\r\n\r\n").encode())
                stuck.append(sock)
            time.sleep(3)
            for path in ["/big/_all_docs?limit=1", "/big", "/big/d000001"]:
                started = time.time()
                req("GET", path)
                print(f"{path} answered in {time.time() - started:.2f} s")
            time.sleep(5)
            print("rss_mb=%d threads=%d (%d stuck clients)" % (*status(node.pid), args.clients))
        finally:
            node.terminate()
            node.wait()


if __name__ == "__main__":
    main()
