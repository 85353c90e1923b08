// Starts one real `settee serve` per test file on a free loopback port with a fresh data
// directory, and stops it afterwards. SETTEE_URL points the suite at an already running
// CouchDB-compatible server instead (admin credentials from SETTEE_ADMIN, default admin:secret).
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');

const ADMIN = process.env.SETTEE_ADMIN || 'admin:secret';
const [ADMIN_USER, ADMIN_PASSWORD] = ADMIN.split(':');

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

async function waitUp(url, deadlineMs) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      const response = await fetch(`${url}/_up`);
      if (response.status === 200) return;
    } catch (_) {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`settee at ${url} did not come up`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function withAuth(url, user = ADMIN_USER, password = ADMIN_PASSWORD) {
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(user);
  parsed.password = encodeURIComponent(password);
  return parsed.toString().replace(/\/$/, '');
}

// `env`: extra environment variables for the server (settings as SETTEE_* variables, which an
// older build that lacks them ignores). `dataDir`: a data directory the caller owns and keeps
// (to start the node again on the same data); otherwise a fresh one removed on stop. `args`:
// more command-line arguments (a cluster node's).
async function start({ env = {}, dataDir: ownDataDir, args = [] } = {}) {
  if (process.env.SETTEE_URL) {
    const url = process.env.SETTEE_URL.replace(/\/$/, '');
    return { url, adminUrl: withAuth(url), stop: async () => {} };
  }
  const bin = process.env.SETTEE_BIN
    || path.join(os.homedir(), '.cache/settee/target/release/settee');
  const dataDir = ownDataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(bin, [
    'serve', '--data-dir', dataDir, '--http-addr', `127.0.0.1:${port}`,
    '--kv-addr', '127.0.0.1:0', '--mgmt-addr', '127.0.0.1:0',
    '--admin', ADMIN, '--max-document-size', '1000000', '--pbkdf2-iterations', '1000',
    ...args,
  ], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  await waitUp(url, 30000);
  return {
    url,
    adminUrl: withAuth(url),
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
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

// `count` real nodes of one cluster on loopback: the first starts it, the others join it;
// resolves once every node sees every member. Not available against SETTEE_URL.
async function startCluster(count, { secret = 'the secret of the compat cluster' } = {}) {
  const nodes = [];
  let join;
  try {
    for (let index = 0; index < count; index += 1) {
      const clusterAddr = `127.0.0.1:${await freePort()}`;
      const args = ['--cluster-addr', clusterAddr, '--cluster-secret', secret];
      if (join) args.push('--join', join);
      nodes.push(await start({ args }));
      join = join || clusterAddr;
    }
    const deadline = Date.now() + 60000;
    for (const node of nodes) {
      for (;;) {
        const { json } = await http('GET', `${node.url}/_node/_local/_cluster`);
        if (json && Array.isArray(json.members) && json.members.length === count) break;
        if (Date.now() > deadline) throw new Error(`${node.url} did not see ${count} members`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    for (const node of nodes) await node.stop();
    throw error;
  }
  return {
    nodes,
    async stop() {
      for (const node of [...nodes].reverse()) await node.stop();
    },
  };
}

module.exports = { start, startCluster, http, withAuth, ADMIN_USER, ADMIN_PASSWORD };
