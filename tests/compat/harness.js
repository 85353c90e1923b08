// Starts one real `settee serve` per test file on a free loopback port with a fresh data
// directory, and stops it afterwards. SETTEE_URL points the suite at an already running
// CouchDB-compatible server instead (admin credentials from SETTEE_ADMIN, default admin:secret).
//
// Cluster mode (SETTEE_CLUSTER=N, as in tests/compat-kv/node/harness.js): start() gives each
// test file an N-node cluster instead. Node 1 makes the cluster, the others join it one at a
// time (one random secret, each node its own free ports, data directory and process group, its
// log on stderr after `[nodeK] `); start() resolves once every node lists N active members. The
// tests talk to node 1 (`url`, `adminUrl`), as to one CouchDB; `nodes` lists every node (the
// one server alone otherwise), for what settee keeps per node by design (`_users`,
// `_replicator`, `_config`, `/_node/_local`), which a test does on every node as an operator
// would. Tests that meet a settee gap in a cluster are skipped there (`CLUSTER`), each with a
// `// cluster:` comment. start({ dataDir }) started again on the same directory starts the same
// cluster again (config_changes_take_effect restarts its server). cluster_replication makes
// its own 3-node cluster (startCluster) in either mode. N nodes per file are heavy on a small
// machine: bound the files run at once (node --test --test-concurrency=2).
'use strict';
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');

const ADMIN = process.env.SETTEE_ADMIN || 'admin:secret';
const [ADMIN_USER, ADMIN_PASSWORD] = ADMIN.split(':');
const CLUSTER_READY_TIMEOUT_MS = 60000;

// The node count of cluster mode, or 0 for the single node (SETTEE_CLUSTER unset or empty).
function clusterSize() {
  const size = process.env.SETTEE_CLUSTER;
  if (size === undefined || size === '') return 0;
  const n = Number(size);
  if (!Number.isInteger(n) || n < 1) throw new Error(`SETTEE_CLUSTER=${JSON.stringify(size)} is not a node count`);
  return n;
}
const CLUSTER = process.env.SETTEE_URL ? 0 : clusterSize();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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

async function waitUp(url, deadlineMs, exited = {}) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    if (exited.code !== undefined) throw new Error(`settee at ${url} exited early with status ${exited.code}`);
    try {
      const response = await fetch(`${url}/_up`);
      if (response.status === 200) return;
    } catch (_) {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`settee at ${url} did not come up`);
    await sleep(100);
  }
}

function withAuth(url, user = ADMIN_USER, password = ADMIN_PASSWORD) {
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(user);
  parsed.password = encodeURIComponent(password);
  return parsed.toString().replace(/\/$/, '');
}

function setteeBinary() {
  return process.env.SETTEE_BIN || path.join(os.homedir(), '.cache/settee/target/release/settee');
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

// Spawns one node on data directory `dataDir` (kept: the caller removes it) and HTTP `port`.
// A cluster node (logPrefix given) runs in its own process group, its log marked.
function spawnNode({ dataDir, port, env = {}, args = [], logPrefix }) {
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(setteeBinary(), [
    'serve', '--data-dir', dataDir, '--http-addr', `127.0.0.1:${port}`,
    '--kv-addr', '127.0.0.1:0', '--mgmt-addr', '127.0.0.1:0',
    '--admin', ADMIN, '--max-document-size', '1000000', '--pbkdf2-iterations', '1000',
    ...args,
  ], {
    stdio: ['ignore', 'ignore', logPrefix ? 'pipe' : 'inherit'],
    detached: Boolean(logPrefix),
    env: { ...process.env, ...env },
  });
  if (logPrefix) prefixLines(child.stderr, logPrefix);
  const exited = {};
  const exitPromise = new Promise((resolve) => child.on('exit', (code, signal) => {
    exited.code = code ?? signal;
    resolve();
  }));
  const signal = (name) => {
    try {
      if (logPrefix) process.kill(-child.pid, name); else child.kill(name);
    } catch (_) { /* already gone */ }
  };
  return {
    url,
    adminUrl: withAuth(url),
    exited,
    async stopProcess() {
      if (exited.code !== undefined) return;
      signal('SIGTERM');
      const timer = setTimeout(() => signal('SIGKILL'), logPrefix ? 10000 : 5000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}

// `env`: extra environment variables for the server (settings as SETTEE_* variables, which an
// older build that lacks them ignores), on every node of a cluster. `dataDir`: a data directory
// the caller owns and keeps (to start the server again on the same data; a cluster keeps each
// node's in it, and its cluster ports and secret in cluster.json); otherwise a fresh one
// removed on stop. `args`: more command-line arguments (a cluster node's; not in cluster mode).
async function start(options = {}) {
  if (process.env.SETTEE_URL) {
    const url = process.env.SETTEE_URL.replace(/\/$/, '');
    return { url, adminUrl: withAuth(url), nodes: [{ url, adminUrl: withAuth(url) }], stop: async () => {} };
  }
  if (CLUSTER) {
    if (options.args && options.args.length) throw new Error('start({ args }) is not for cluster mode');
    const cluster = await startCluster(CLUSTER, { env: options.env, dataDir: options.dataDir });
    const [first] = cluster.nodes;
    return { url: first.url, adminUrl: first.adminUrl, nodes: cluster.nodes, stop: cluster.stop };
  }
  const { env = {}, dataDir: ownDataDir, args = [] } = options;
  const dataDir = ownDataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-'));
  const node = spawnNode({ dataDir, port: await freePort(), env, args });
  await waitUp(node.url, 30000, node.exited);
  return {
    url: node.url,
    adminUrl: node.adminUrl,
    nodes: [node],
    async stop() {
      await node.stopProcess();
      if (!ownDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

// Plain HTTP with fetch, for status codes and headers the client libraries hide.
async function http(method, url, { body, headers = {}, user = ADMIN_USER, password = ADMIN_PASSWORD } = {}) {
  const auth = user === null ? {} : { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` };
  const init = { method, headers: { ...auth, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    if (!init.headers['content-type']) init.headers['content-type'] = 'application/json';
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let json;
  try { json = JSON.parse(text); } catch (_) { json = undefined; }
  return { status: response.status, headers: response.headers, text, json };
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
      if (Date.now() > deadline) throw new Error(`node${index + 1} (${node.url}): timed out waiting for ${what}`);
      await sleep(100);
    }
  }
}

// `count` real nodes of one cluster on loopback: the first starts it, the others join it one at
// a time; resolves once every node lists every member as active. `dataDir` as for start(): a
// second start on it starts the same cluster again (same cluster ports and secret, every node at
// once). Not available against SETTEE_URL. A port found free can be taken by another test
// file's server before settee binds it: settee then exits at once, and is started again.
async function startCluster(count, options = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(count, options);
    } catch (error) {
      if (attempt >= 3 || !/exited early/.test(error.message)) throw error;
    }
  }
}

async function startClusterOnce(count, { env = {}, dataDir: ownDataDir, secret } = {}) {
  const root = ownDataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-cluster-'));
  const layoutFile = path.join(root, 'cluster.json');
  const again = ownDataDir && fs.existsSync(layoutFile);
  const layout = again ? JSON.parse(fs.readFileSync(layoutFile, 'utf8')) : {
    secret: secret || crypto.randomBytes(24).toString('base64'),
    clusterPorts: [],
  };
  const nodes = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stopProcess()));
    if (!ownDataDir) fs.rmSync(root, { recursive: true, force: true });
  };
  try {
    const nodeEnv = { ...env, SETTEE_CLUSTER_SECRET: layout.secret };
    for (let k = 1; k <= count; k++) {
      if (!again) layout.clusterPorts.push(await freePort());
      const args = ['--cluster-addr', `127.0.0.1:${layout.clusterPorts[k - 1]}`];
      if (!again && k > 1) args.push('--join', `127.0.0.1:${layout.clusterPorts[0]}`);
      const dataDir = path.join(root, `node${k}`);
      fs.mkdirSync(dataDir, { recursive: true });
      const node = spawnNode({ dataDir, port: await freePort(), env: nodeEnv, args, logPrefix: `[node${k}] ` });
      nodes.push(node);
      // A new cluster grows one node at a time; a cluster started again needs its members
      // together (a quorum) before it serves.
      if (!again) await waitUp(node.url, 30000, node.exited);
    }
    if (again) for (const node of nodes) await waitUp(node.url, 30000, node.exited);
    else if (ownDataDir) fs.writeFileSync(layoutFile, JSON.stringify(layout));
    await waitForEvery(nodes, `the cluster map to list ${count} active members`, async (node) => {
      const { status, json } = await http('GET', `${node.url}/_node/_local/_cluster`);
      return status === 200 && Array.isArray(json?.members) && json.members.length === count
        && json.members.every((member) => member.state === 'active');
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, stop };
}

module.exports = { CLUSTER, start, startCluster, http, withAuth, ADMIN_USER, ADMIN_PASSWORD };
