'use strict';
// PouchDB and nano against a three-node settee cluster whose database keeps one copy of each
// document (n=1), so no node holds every document: writes through any node land on their
// active, a pull through one node sees every document, and a pull through another node of the
// same cluster resumes from the first one's checkpoint instead of starting again.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { startCluster, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

const skip = process.env.SETTEE_URL ? 'needs settee processes of its own' : false;
let cluster;
let localDir;
const auth = { username: ADMIN_USER, password: ADMIN_PASSWORD };

test.before(async () => {
  if (skip) return;
  cluster = await startCluster(3);
  localDir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-pouch-cluster-'));
});
test.after(async () => {
  if (skip) return;
  await cluster.stop();
  fs.rmSync(localDir, { recursive: true, force: true });
});

test('every node of a cluster shows the same server uuid', { skip }, async () => {
  const uuids = await Promise.all(cluster.nodes.map(async (node) => (await http('GET', `${node.url}/`)).json.uuid));
  assert.equal(new Set(uuids).size, 1, uuids.join(' '));
});

test('PouchDB pulls every document through any node and resumes on another', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  const created = await http('PUT', `${a.url}/pulled?q=16&n=1`);
  assert.equal(created.status, 201, created.text);
  const nano = require('nano')(c.adminUrl);
  const db = nano.db.use('pulled');
  const first = Array.from({ length: 40 }, (_, i) => ({ _id: `first-${i}`, i }));
  const written = await db.bulk({ docs: first });
  assert.equal(written.filter((row) => row.ok).length, 40);
  const listed = await nano.db.use('pulled').list();
  assert.equal(listed.rows.length, 40, 'nano lists every document through one node');

  const local = new PouchDB(path.join(localDir, 'pulled'));
  const throughA = new PouchDB(`${a.url}/pulled`, { auth });
  const pulled = await PouchDB.replicate(throughA, local);
  assert.equal(pulled.ok, true);
  assert.equal(pulled.docs_written, 40);

  const more = Array.from({ length: 7 }, (_, i) => ({ _id: `second-${i}`, i }));
  await db.bulk({ docs: more });
  const throughB = new PouchDB(`${b.url}/pulled`, { auth });
  const again = await PouchDB.replicate(throughB, local);
  assert.equal(again.ok, true);
  assert.equal(again.docs_read, 7, 'through node B it resumes where node A left off');
  assert.equal(again.docs_written, 7);
  const info = await local.info();
  assert.equal(info.doc_count, 47);
  await local.close();
});

test('PouchDB pushes through one node and every node reads the documents', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  assert.equal((await http('PUT', `${b.url}/pushed?q=16&n=1`)).status, 201);
  const local = new PouchDB(path.join(localDir, 'pushed'));
  await local.bulkDocs(Array.from({ length: 30 }, (_, i) => ({ _id: `doc-${i}`, i })));
  const pushed = await PouchDB.replicate(local, new PouchDB(`${c.url}/pushed`, { auth }));
  assert.equal(pushed.ok, true);
  assert.equal(pushed.docs_written, 30);
  for (const node of [a, b, c]) {
    const all = await http('GET', `${node.url}/pushed/_all_docs`);
    assert.equal(all.json.total_rows, 30);
    const doc = await http('GET', `${node.url}/pushed/doc-17`);
    assert.equal(doc.json.i, 17);
  }
  // Pushed again through another node: nothing left to send.
  const again = await PouchDB.replicate(local, new PouchDB(`${a.url}/pushed`, { auth }));
  assert.equal(again.docs_written, 0);
  await local.close();
});

test('a live PouchDB pull through one node sees writes made through the others', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  assert.equal((await http('PUT', `${a.url}/live?q=16&n=1`)).status, 201);
  const local = new PouchDB(path.join(localDir, 'live'));
  const live = PouchDB.replicate(new PouchDB(`${a.url}/live`, { auth }), local, { live: true, retry: true });
  try {
    const ids = ['live-b-1', 'live-c-2', 'live-b-3', 'live-c-4'];
    for (const [index, id] of ids.entries()) {
      const node = index % 2 === 0 ? b : c;
      assert.equal((await http('PUT', `${node.url}/live/${id}`, { body: { index } })).status, 201);
    }
    const deadline = Date.now() + 20000;
    for (;;) {
      const { rows } = await local.allDocs();
      if (rows.length === ids.length) break;
      assert.ok(Date.now() < deadline, `the live pull has ${rows.length} of ${ids.length} documents`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    live.cancel();
    await local.close();
  }
});
