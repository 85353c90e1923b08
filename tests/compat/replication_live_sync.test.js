'use strict';
// PouchDB (leveldb) live-syncing with settee both ways: creates, updates, deletes,
// attachments, conflicts made on both sides and resolved, filtered replication, and a
// continuous sync that picks up writes made after it started.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let dir;
const auth = { username: ADMIN_USER, password: ADMIN_PASSWORD };

test.before(async () => {
  server = await start();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-live-'));
});
test.after(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await server.stop();
});

async function eventually(what, check, deadlineMs = 10000) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch (_) {
      // not there yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function remoteDb(name) {
  const db = new PouchDB(`${server.url}/${name}`, { auth });
  await db.info(); // PouchDB creates the database if it is missing
  return db;
}

async function sameDocs(a, b) {
  const all = async (db) => (await db.allDocs({ include_docs: true, conflicts: true })).rows
    .map((row) => ({ id: row.id, rev: row.value.rev, conflicts: (row.doc._conflicts || []).sort() }));
  assert.deepEqual(await all(a), await all(b));
}

test('live sync carries creates, updates, deletes and attachments both ways', async () => {
  const remote = await remoteDb('live');
  const local = new PouchDB(path.join(dir, 'live'));
  const sync = local.sync(remote, { live: true, retry: true });
  try {
    await remote.put({ _id: 'from-settee', v: 1 });
    await local.put({ _id: 'from-pouch', v: 1 });
    await eventually('settee doc in PouchDB', async () => (await local.get('from-settee')).v === 1);
    await eventually('PouchDB doc on settee', async () => (await remote.get('from-pouch')).v === 1);

    const doc = await local.get('from-settee');
    await local.put({ ...doc, v: 2 });
    await eventually('update reaches settee', async () => (await remote.get('from-settee')).v === 2);

    const gone = await remote.get('from-pouch');
    await remote.remove(gone);
    await eventually('delete reaches PouchDB', async () => {
      try { await local.get('from-pouch'); return false; } catch (error) { return error.status === 404; }
    });

    await local.putAttachment('with-att', 'hello.txt', Buffer.from('hello settee'), 'text/plain');
    await eventually('attachment on settee', async () => {
      const data = await remote.getAttachment('with-att', 'hello.txt');
      return Buffer.from(data).toString() === 'hello settee';
    });
    const withAtt = await remote.get('with-att');
    await remote.putAttachment('with-att', 'second.bin', withAtt._rev, Buffer.from([1, 2, 3]), 'application/octet-stream');
    await eventually('second attachment in PouchDB', async () => {
      const data = await local.getAttachment('with-att', 'second.bin');
      return Buffer.from(data).equals(Buffer.from([1, 2, 3]));
    });
  } finally {
    sync.cancel();
  }
  await sameDocs(local, remote);
  await local.destroy();
});

test('conflicts made on both sides converge, then resolve by deleting the loser', async () => {
  const remote = await remoteDb('conflicts');
  const local = new PouchDB(path.join(dir, 'conflicts'));
  await remote.put({ _id: 'c', v: 'base' });
  await PouchDB.replicate(remote, local);
  const base = await remote.get('c');
  await remote.put({ ...base, v: 'settee' });
  await local.put({ ...(await local.get('c')), v: 'pouch' });
  await PouchDB.sync(local, remote);
  const a = await local.get('c', { conflicts: true });
  const b = await remote.get('c', { conflicts: true });
  assert.equal(a._rev, b._rev, 'both sides pick the same winner');
  assert.deepEqual(a._conflicts, b._conflicts);
  assert.equal(b._conflicts.length, 1);
  // Resolve on settee by deleting the losing revision; the resolution syncs back.
  await remote.remove('c', b._conflicts[0]);
  await PouchDB.sync(local, remote);
  const resolvedLocal = await local.get('c', { conflicts: true });
  const resolvedRemote = await remote.get('c', { conflicts: true });
  assert.equal(resolvedLocal._conflicts, undefined);
  assert.equal(resolvedRemote._conflicts, undefined);
  assert.equal(resolvedLocal._rev, resolvedRemote._rev);
  await sameDocs(local, remote);
  await local.destroy();
});

test('filtered replication: selector and doc_ids', async () => {
  const remote = await remoteDb('filtered');
  await remote.bulkDocs([
    { _id: 'k1', type: 'keep' }, { _id: 'k2', type: 'keep' }, { _id: 'o1', type: 'other' },
  ]);
  const bySelector = new PouchDB(path.join(dir, 'by-selector'));
  await PouchDB.replicate(remote, bySelector, { selector: { type: 'keep' } });
  assert.deepEqual((await bySelector.allDocs()).rows.map((row) => row.id), ['k1', 'k2']);
  const byIds = new PouchDB(path.join(dir, 'by-ids'));
  await PouchDB.replicate(remote, byIds, { doc_ids: ['o1', 'k2'] });
  assert.deepEqual((await byIds.allDocs()).rows.map((row) => row.id), ['k2', 'o1']);
  await bySelector.destroy();
  await byIds.destroy();
});

test('a continuous pull picks up writes made after it started', async (t) => {
  const remote = await remoteDb('continuous');
  const local = new PouchDB(path.join(dir, 'continuous'));
  const replication = PouchDB.replicate(remote, local, { live: true, retry: true });
  try {
    // How long each write took to arrive is reported, not asserted (no timing thresholds in
    // tests); the deadline only catches a feed that never delivers.
    const took = [];
    for (let n = 0; n < 3; n += 1) {
      const written = Date.now();
      await remote.put({ _id: `late-${n}`, n });
      await eventually(`late-${n} in PouchDB`, async () => (await local.get(`late-${n}`)).n === n, 5000);
      took.push(Date.now() - written);
    }
    t.diagnostic(`write-to-PouchDB latency of a continuous pull (ms): ${took.join(', ')}`);
  } finally {
    replication.cancel();
  }
  await local.destroy();
});
