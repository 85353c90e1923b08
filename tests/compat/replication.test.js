'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let remote;
let local;
let localDir;
test.before(async () => {
  server = await start();
  const nano = require('nano')(server.adminUrl);
  await nano.db.create('sync');
  remote = new PouchDB(`${server.url}/sync`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  localDir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-pouch-'));
  local = new PouchDB(path.join(localDir, 'db'));
});
test.after(async () => {
  await local.destroy();
  fs.rmSync(localDir, { recursive: true, force: true });
  await server.stop();
});

test('PouchDB pulls from and pushes to settee, and resumes from its checkpoint', async () => {
  await remote.bulkDocs([{ _id: 'r1', v: 1 }, { _id: 'r2', v: 2 }]);
  const pulled = await PouchDB.replicate(remote, local);
  assert.equal(pulled.ok, true);
  assert.equal(pulled.docs_written, 2);
  await local.put({ _id: 'l1', v: 3 });
  const pushed = await PouchDB.replicate(local, remote);
  assert.equal(pushed.ok, true);
  assert.equal(pushed.docs_written, 1);
  assert.equal((await remote.get('l1')).v, 3);
  // A second pull starts from the checkpoint kept in a _local document on settee.
  await remote.put({ _id: 'r3', v: 4 });
  const again = await PouchDB.replicate(remote, local);
  assert.equal(again.docs_written, 1);
});

test('conflicting edits on both sides converge to the same winner', async () => {
  const base = await remote.get('r1');
  await PouchDB.replicate(remote, local);
  await remote.put({ ...base, v: 'remote' });
  const localBase = await local.get('r1');
  await local.put({ ...localBase, v: 'local' });
  await PouchDB.sync(local, remote);
  const a = await local.get('r1', { conflicts: true });
  const b = await remote.get('r1', { conflicts: true });
  assert.equal(a._rev, b._rev);
  assert.deepEqual(a._conflicts, b._conflicts);
  assert.equal(b._conflicts.length, 1);
});
