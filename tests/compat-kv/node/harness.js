// Starts one real `settee serve` per test file (node --test runs each file in its own process)
// with a fresh data directory and free loopback ports (and TLS, with a test CA made by
// tests/tls/make-certs.sh, for the couchbases:// tests), prepares it through the CouchDB HTTP API
// (buckets `default`, `private`, `small?q=8`; user alice who may use `default` only), connects
// the official Couchbase SDK, and stops everything afterwards (process group, data directory).
//
// Cluster mode (SETTEE_CLUSTER=N, as in the Go suite's cluster_test.go): each test file gets N
// nodes instead. Node 1 makes the cluster, the others join it one at a time; each node gets the
// single node's TLS doors (one test CA for all), its own free ports and directory and its own
// process group. Once every node lists N active members, prepare() runs on node 1; then every
// node must log alice in (accounts are the cluster's: `_users` has a copy on every node) and
// serve every database. The tests get node 1 as `settee` (its HTTP door) with
// connection strings that list every node's KV (and KV TLS) door. Three nodes per file are
// heavy on a small machine: bound the files run at once (node --test --test-concurrency=4).
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
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
const CLUSTER_READY_TIMEOUT_MS = 60000;

// The node count of cluster mode, or 0 for the single node (SETTEE_CLUSTER unset or empty).
function clusterSize() {
  const size = process.env.SETTEE_CLUSTER;
  if (size === undefined || size === '') return 0;
  const n = Number(size);
  if (!Number.isInteger(n) || n < 1) throw new Error(`SETTEE_CLUSTER=${JSON.stringify(size)} is not a node count`);
  return n;
}
const CLUSTER = clusterSize();

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

// The users prepare makes (once for a cluster: `_users` has a copy on every node).
async function makeAccounts(settee) {
  await expectStatus(settee.http('PUT', '/_users/org.couchdb.user:alice',
    { name: 'alice', password: 'alicepw', roles: [], type: 'user' }), 201, 202);
}

async function prepare(settee) {
  await expectStatus(settee.http('PUT', '/default'), 201);
  await expectStatus(settee.http('PUT', '/private'), 201);
  await expectStatus(settee.http('PUT', '/small?q=8'), 201);
  await makeAccounts(settee);
  await expectStatus(settee.http('PUT', '/default/_security', {
    admins: { names: [], roles: [] }, members: { names: ['alice'], roles: [] },
  }), 200);
}

// A port found free can be taken by another test file's server before settee binds it (the
// files run in parallel): settee then exits at once, and is started again on new ports.
async function startSettee() {
  for (let attempt = 1; ; attempt++) {
    try {
      return CLUSTER ? await startClusterOnce(CLUSTER) : await startSetteeOnce();
    } catch (error) {
      if (attempt >= 3 || !/exited early/.test(error.message)) throw error;
    }
  }
}

function setteeBinary() {
  return process.env.SETTEE_BIN || path.join(os.homedir(), '.cache/settee/target/release/settee');
}

// A Settee on free ports, its certificates in certs.
async function withFreePorts(certs) {
  return new Settee(
    await freePort(), await freePort(), await freePort(), await freePort(), await freePort(), certs,
  );
}

// Starts one node (in its own process group) with data in `data`, the plain and TLS doors and
// the given extra arguments and environment, and waits until it serves. Its log goes to this
// process's stderr, each line after `logPrefix` if one is given. Sets settee.stopProcess.
async function launch(settee, data, { extra = [], env = process.env, logPrefix } = {}) {
  const child = spawn(setteeBinary(), [
    'serve', '--data-dir', data,
    '--tls-cert', path.join(settee.certs, 'node.crt'), '--tls-key', path.join(settee.certs, 'node.key'),
    '--https-addr', `127.0.0.1:${settee.httpsPort}`,
    '--kv-tls-addr', `127.0.0.1:${settee.kvTlsPort}`,
    '--mgmt-tls-addr', `127.0.0.1:${await freePort()}`,
    '--http-addr', `127.0.0.1:${settee.httpPort}`,
    '--kv-addr', `127.0.0.1:${settee.kvPort}`,
    '--mgmt-addr', `127.0.0.1:${settee.mgmtPort}`,
    '--admin', 'admin:secret', '--pbkdf2-iterations', '1000',
    ...extra,
  ], { stdio: ['ignore', 'ignore', logPrefix ? 'pipe' : 'inherit'], detached: true, env });
  if (logPrefix) prefixLines(child.stderr, logPrefix);
  const exited = {};
  const exitPromise = new Promise((resolve) => child.on('exit', (code, signal) => {
    exited.code = code ?? signal;
    resolve();
  }));
  settee.stopProcess = async () => {
    if (exited.code === undefined) {
      try { process.kill(-child.pid, 'SIGTERM'); } catch (_) { /* already gone */ }
      const timer = setTimeout(() => {
        try { process.kill(-child.pid, 'SIGKILL'); } catch (_) { /* already gone */ }
      }, 10000);
      await exitPromise;
      clearTimeout(timer);
    }
  };
  await waitUp(settee, exited);
}

// Copies a node's log to stderr line by line, each line marked with the node.
function prefixLines(stream, prefix) {
  let pending = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    pending += chunk;
    let end;
    while ((end = pending.indexOf('\n')) >= 0) {
      process.stderr.write(`${prefix}${pending.slice(0, end + 1)}`);
      pending = pending.slice(end + 1);
    }
  });
  stream.on('end', () => { if (pending) process.stderr.write(`${prefix}${pending}\n`); });
}

async function startSetteeOnce() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-kv-node-'));
  const certs = path.join(dataDir, 'certs');
  const settee = await withFreePorts(certs);
  settee.nodes = [settee];
  settee.stop = async () => {
    await settee.stopProcess?.();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    execFileSync(MAKE_CERTS, [certs]);
    await launch(settee, path.join(dataDir, 'data'));
    await prepare(settee);
  } catch (error) {
    await settee.stop();
    throw error;
  }
  return settee;
}

// Polls until ready(node) holds on every node, in order, within one deadline.
async function waitForEvery(nodes, what, ready) {
  const deadline = Date.now() + CLUSTER_READY_TIMEOUT_MS;
  for (const [index, node] of nodes.entries()) {
    for (;;) {
      try {
        if (await ready(node)) break;
      } catch (_) {
        // not answering yet
      }
      if (Date.now() > deadline) throw new Error(`node${index + 1}: timed out waiting for ${what}`);
      await sleep(100);
    }
  }
}

// n nodes: node 1 (returned, its `peers` the others) makes the cluster, the others join it.
async function startClusterOnce(n) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-kv-node-cluster-'));
  const certs = path.join(root, 'certs');
  const nodes = [];
  const first = await withFreePorts(certs);
  first.peers = [];
  first.stop = async () => {
    await Promise.all(nodes.map((node) => node.stopProcess?.()));
    fs.rmSync(root, { recursive: true, force: true });
  };
  try {
    execFileSync(MAKE_CERTS, [certs]);
    const env = { ...process.env, SETTEE_CLUSTER_SECRET: crypto.randomBytes(24).toString('base64') };
    let join;
    for (let k = 1; k <= n; k++) {
      const node = k === 1 ? first : await withFreePorts(certs);
      if (k > 1) first.peers.push(node);
      nodes.push(node);
      const clusterAddr = `127.0.0.1:${await freePort()}`;
      const extra = ['--cluster-addr', clusterAddr];
      if (join) extra.push('--join', join); else join = clusterAddr;
      try {
        await launch(node, path.join(root, `node${k}`), { extra, env, logPrefix: `[node${k}] ` });
      } catch (error) {
        error.message = `node${k}: ${error.message}`;
        throw error;
      }
    }
    await waitForEvery(nodes, 'the cluster map to list every member', async (node) => {
      const { status, json } = await node.http('GET', '/_node/_local/_cluster');
      return status === 200 && Array.isArray(json?.members) && json.members.length === n
        && json.members.every((member) => member.state === 'active');
    });
    await prepare(first);
    // Accounts are the cluster's: made through node 1, they reach every node's copy.
    const alice = { username: 'alice', password: 'alicepw' };
    await waitForEvery(nodes, 'alice to log in', async (node) => {
      const { status, json } = await node.http('GET', '/_session', undefined, alice);
      return status === 200 && json?.userCtx?.name === 'alice';
    });
    for (const db of ['default', 'private', 'small']) {
      await waitForEvery(nodes, `database ${db}`, async (node) => (await node.http('GET', `/${db}`)).status === 200);
    }
  } catch (error) {
    await first.stop();
    throw error;
  }
  first.nodes = nodes;
  first.connectionString = `couchbase://${nodes.map((node) => `127.0.0.1:${node.kvPort}`).join(',')}`;
  first.tlsConnectionString = `couchbases://${nodes.map((node) => `127.0.0.1:${node.kvTlsPort}`).join(',')}`;
  return first;
}

// Waits until every node's management door (GET .../scopes) shows a manifest of `bucket` for
// which holds(scopes) is true. A manifest change answers once the node that took it has it; the
// other nodes of a cluster follow a moment later, and the SDK sends each management request and
// each collection id lookup to any node. Couchbase Server reads the scopes from the node's own
// copy too, which is why the SDKs' own test suites wait for every node after each change
// (couchnode test/consistencyutil.js). A single node: at once.
async function waitForManifestOnEveryNode(settee, bucket, holds, timeoutMs = 10000) {
  const authorization = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;
  const deadline = Date.now() + timeoutMs;
  for (const [index, node] of settee.nodes.entries()) {
    for (;;) {
      const response = await fetch(
        `http://127.0.0.1:${node.mgmtPort}/pools/default/buckets/${encodeURIComponent(bucket)}/scopes`,
        { headers: { authorization } },
      );
      const body = await response.json().catch(() => undefined);
      if (response.status === 200 && Array.isArray(body?.scopes) && holds(body.scopes)) break;
      if (Date.now() > deadline) {
        throw new Error(`node${index + 1}: the manifest of ${bucket} did not reach the expected state: ${JSON.stringify(body)}`);
      }
      await sleep(10);
    }
  }
}

async function waitUntilReady(cluster) {
  await cluster.waitUntilReady(READY_TIMEOUT_MS, { serviceTypes: [couchbase.ServiceType.KeyValue] });
}

// Everything one test file needs: the server, an admin cluster, `default`'s default collection.
async function setUp() {
  const settee = await startSettee();
  let cluster;
  let bucket;
  try {
    cluster = await settee.connect();
    await waitUntilReady(cluster);
    // The bucket's own connections too (one per node in a cluster), as the Go suite waits.
    bucket = cluster.bucket('default');
    await bucket.waitUntilReady(READY_TIMEOUT_MS, { serviceTypes: [couchbase.ServiceType.KeyValue] });
  } catch (error) {
    await cluster?.close();
    await settee.stop();
    throw error;
  }
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
  CLUSTER, ADMIN, ALICE, KV_TIMEOUT_MS, setUp, startSettee, waitUntilReady, waitForManifestOnEveryNode,
  uniqueKey, casString, sleep, couchbase,
};
