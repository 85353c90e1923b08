'use strict';
// Issue 22 point 3: settings changed through /_node/_local/_config (nano has no config API:
// its generic `request`) change what the node does at once, and again after a restart on the
// same data; a change sent with X-Couch-Persist: false does not survive the restart.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const nano = require('nano');
const { start, http } = require('./harness');

const DB = 'configured';
const dataDir = process.env.SETTEE_URL
  ? undefined
  : fs.mkdtempSync(path.join(os.tmpdir(), 'settee-compat-config-'));
let server;
let client;

// The configuration is per node in settee (as in CouchDB): in a cluster (SETTEE_CLUSTER) a
// change is made on every node, as an operator makes it; node 1's answer is the one checked.
const setConfig = async (section, key, value) => (await Promise.all(server.nodes.map((node) =>
  nano(node.adminUrl).request({ method: 'PUT', path: `_node/_local/_config/${section}/${key}`, body: value }))))[0];

async function restart() {
  await server.stop();
  server = await start({ dataDir });
  client = nano(server.adminUrl);
}

test.before(async () => {
  server = await start({ dataDir });
  client = nano(server.adminUrl);
  await client.db.create(DB);
});
test.after(async () => {
  await server.stop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

test('a _config change takes effect at once and after a restart', async () => {
  const db = client.use(DB);
  const big = { pad: 'x'.repeat(2000) };
  await db.insert(big, 'before');

  assert.equal(await setConfig('couchdb', 'max_document_size', '1000'), '1000000');
  await assert.rejects(db.insert(big, 'after'), (error) => error.statusCode === 413);
  assert.equal(await setConfig('uuids', 'algorithm', 'utc_id'), '');
  assert.equal(await setConfig('uuids', 'utc_id_suffix', '-nano'), '');
  assert.match((await db.insert({})).id, /^[0-9a-f]{14}-nano$/);
  assert.equal(await setConfig('chttpd', 'allow_jsonp', 'true'), '');
  const jsonp = await http('GET', `${server.url}/${DB}/before?callback=got`);
  assert.equal(jsonp.headers.get('content-type'), 'application/javascript');
  assert.match(jsonp.text, /^\/\* CouchDB \*\/got\(\{"_id":"before"/);
  for (const node of server.nodes) {
    const volatile = await http('PUT', `${node.url}/_node/_local/_config/test/volatile`, {
      body: '"yes"', headers: { 'x-couch-persist': 'false' },
    });
    assert.equal(volatile.status, 200);
  }

  await restart();
  const db2 = client.use(DB);
  await assert.rejects(db2.insert(big, 'after'), (error) => error.statusCode === 413);
  assert.match((await db2.insert({})).id, /^[0-9a-f]{14}-nano$/);
  const section = await client.request({ path: '_node/_local/_config/uuids' });
  assert.deepEqual(section, { algorithm: 'utc_id', utc_id_suffix: '-nano' });
  await assert.rejects(
    client.request({ path: '_node/_local/_config/test/volatile' }),
    (error) => error.statusCode === 404 && error.reason === 'unknown_config_value',
  );

  // DELETE answers the old value and puts the default back.
  for (const node of server.nodes) {
    assert.equal(
      await nano(node.adminUrl).request({ method: 'DELETE', path: '_node/_local/_config/couchdb/max_document_size' }),
      '1000',
    );
  }
  await db2.insert(big, 'after');
});

test('bad values are refused and only admins may read the configuration', async () => {
  await assert.rejects(setConfig('uuids', 'algorithm', 'bogus'), (error) => error.statusCode === 400);
  const anonymous = await http('GET', `${server.url}/_node/_local/_config`, { user: null });
  assert.equal(anonymous.status, 401);
  const membership = await client.request({ path: '_membership' });
  assert.deepEqual(membership.all_nodes, membership.cluster_nodes);
  assert.equal(membership.all_nodes.length, server.nodes.length);
  // Each node by its own name, through itself and through the first node (which passes the
  // request to the node named, as CouchDB does).
  for (const node of server.nodes) {
    const { name } = await nano(node.adminUrl).request({ path: '_node/_local' });
    assert.ok(membership.all_nodes.includes(name), name);
    const byName = await nano(node.adminUrl).request({ path: `_node/${name}/_config/uuids/algorithm` });
    assert.equal(byName, 'utc_id', name);
    const through = await client.request({ path: `_node/${name}` });
    assert.equal(through.name, name);
  }
});
