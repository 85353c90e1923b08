// Starts one real `settee serve` per test file (node --test runs each file in its own process)
// with a fresh data directory and free loopback ports (and TLS, with a test CA made by
// tests/tls/make-certs.sh, for the couchbases:// tests), prepares it through the CouchDB HTTP API
// (buckets `default`, `private`, `small?q=8`; user alice who may use `default` only), connects
// the official Couchbase SDK, and stops everything afterwards (process group, data directory).
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const assert = require('node:assert/strict');
const couchbase = require('couchbase');

const ADMIN = { username: 'admin', password: 'secret' };
const ALICE = { username: 'alice', password: 'alicepw' };
// Short enough that an expected timeout costs little, long enough for a loaded CI machine.
const KV_TIMEOUT_MS = 2500;
const CONNECT_TIMEOUT_MS = 10000;
const READY_TIMEOUT_MS = 15000;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function tcpAccepts(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const MAKE_CERTS = path.join(__dirname, '..', '..', 'tls', 'make-certs.sh');

class Settee {
  constructor(httpPort, kvPort, mgmtPort, httpsPort, kvTlsPort, certs) {
    this.httpPort = httpPort;
    this.kvPort = kvPort;
    this.mgmtPort = mgmtPort;
    this.httpsPort = httpsPort;
    this.kvTlsPort = kvTlsPort;
    // The test CA (ca.crt) and a CA that signed nothing of the node's (other-ca.crt).
    this.certs = certs;
    this.httpUrl = `http://127.0.0.1:${httpPort}`;
    this.connectionString = `couchbase://127.0.0.1:${kvPort}`;
    this.tlsConnectionString = `couchbases://127.0.0.1:${kvTlsPort}`;
  }

  // One HTTP request to the CouchDB door; returns { status, json, text }.
  async http(method, urlPath, body, user = ADMIN) {
    const headers = {};
    if (user) {
      headers.authorization = `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
    }
    const init = { method, headers };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    const response = await fetch(this.httpUrl + urlPath, init);
    const text = await response.text();
    let json;
    try { json = JSON.parse(text); } catch (_) { json = undefined; }
    return { status: response.status, json, text };
  }

  connect(user = ADMIN, { kvTimeout = KV_TIMEOUT_MS, connectTimeout = CONNECT_TIMEOUT_MS } = {}) {
    return couchbase.connect(this.connectionString, {
      username: user.username,
      password: user.password,
      timeouts: { kvTimeout, connectTimeout, bootstrapTimeout: connectTimeout },
    });
  }
}

async function waitUp(settee, exited) {
  const deadline = Date.now() + 30000;
  for (;;) {
    if (exited.code !== undefined) throw new Error(`settee exited early with status ${exited.code}`);
    try {
      const response = await fetch(`${settee.httpUrl}/_up`);
      if (response.status === 200 && await tcpAccepts(settee.kvPort)) return;
    } catch (_) {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('settee did not come up');
    await sleep(100);
  }
}

async function expectStatus(promise, ...statuses) {
  const { status, text } = await promise;
  assert.ok(statuses.includes(status), `HTTP setup answered ${status}: ${text}`);
}

async function prepare(settee) {
  await expectStatus(settee.http('PUT', '/default'), 201);
  await expectStatus(settee.http('PUT', '/private'), 201);
  await expectStatus(settee.http('PUT', '/small?q=8'), 201);
  await expectStatus(settee.http('PUT', '/_users/org.couchdb.user:alice',
    { name: 'alice', password: 'alicepw', roles: [], type: 'user' }), 201, 202);
  await expectStatus(settee.http('PUT', '/default/_security', {
    admins: { names: [], roles: [] }, members: { names: ['alice'], roles: [] },
  }), 200);
}

// A port found free can be taken by another test file's server before settee binds it (the
// files run in parallel): settee then exits at once, and is started again on new ports.
async function startSettee() {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startSetteeOnce();
    } catch (error) {
      if (attempt >= 3 || !/exited early/.test(error.message)) throw error;
    }
  }
}

async function startSetteeOnce() {
  const bin = process.env.SETTEE_BIN
    || path.join(os.homedir(), '.cache/settee/target/release/settee');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-kv-node-'));
  const certs = path.join(dataDir, 'certs');
  execFileSync(MAKE_CERTS, [certs]);
  const settee = new Settee(
    await freePort(), await freePort(), await freePort(), await freePort(), await freePort(), certs,
  );
  const child = spawn(bin, [
    'serve', '--data-dir', path.join(dataDir, 'data'),
    '--tls-cert', path.join(certs, 'node.crt'), '--tls-key', path.join(certs, 'node.key'),
    '--https-addr', `127.0.0.1:${settee.httpsPort}`,
    '--kv-tls-addr', `127.0.0.1:${settee.kvTlsPort}`,
    '--mgmt-tls-addr', `127.0.0.1:${await freePort()}`,
    '--http-addr', `127.0.0.1:${settee.httpPort}`,
    '--kv-addr', `127.0.0.1:${settee.kvPort}`,
    '--mgmt-addr', `127.0.0.1:${settee.mgmtPort}`,
    '--admin', 'admin:secret', '--pbkdf2-iterations', '1000',
  ], { stdio: ['ignore', 'ignore', 'inherit'], detached: true });
  const exited = {};
  const exitPromise = new Promise((resolve) => child.on('exit', (code) => { exited.code = code; resolve(); }));
  settee.stop = async () => {
    if (exited.code === undefined) {
      try { process.kill(-child.pid, 'SIGTERM'); } catch (_) { /* already gone */ }
      const timer = setTimeout(() => {
        try { process.kill(-child.pid, 'SIGKILL'); } catch (_) { /* already gone */ }
      }, 10000);
      await exitPromise;
      clearTimeout(timer);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitUp(settee, exited);
    await prepare(settee);
  } catch (error) {
    await settee.stop();
    throw error;
  }
  return settee;
}

async function waitUntilReady(cluster) {
  await cluster.waitUntilReady(READY_TIMEOUT_MS, { serviceTypes: [couchbase.ServiceType.KeyValue] });
}

// Everything one test file needs: the server, an admin cluster, `default`'s default collection.
async function setUp() {
  const settee = await startSettee();
  let cluster;
  try {
    cluster = await settee.connect();
    await waitUntilReady(cluster);
  } catch (error) {
    await settee.stop();
    throw error;
  }
  const bucket = cluster.bucket('default');
  const env = { settee, cluster, bucket, collection: bucket.defaultCollection() };
  env.tearDown = async () => {
    await cluster.close();
    await settee.stop();
  };
  return env;
}

let keyCounter = 0;
// A document id unique to the test.
function uniqueKey(name) {
  keyCounter += 1;
  return `node::${name}::${process.pid}::${Date.now()}::${keyCounter}`;
}

const casString = (cas) => String(cas);

module.exports = {
  ADMIN, ALICE, KV_TIMEOUT_MS, setUp, startSettee, waitUntilReady, uniqueKey, casString, sleep, couchbase,
};
