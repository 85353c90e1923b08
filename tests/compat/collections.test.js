'use strict';
// Couchbase collections through the CouchDB door (docs/format/collections.md): nano creates,
// lists and drops `bucket$scope$collection` databases, and PouchDB replicates one collection
// to and from a local database, resuming from its checkpoint, without touching the bucket's
// other collections.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');


const COLLECTION = 'travel$inventory$(a)irline';

let server;
let nano;
let localDir;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('travel');
  await nano.db.create(COLLECTION);
  localDir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-pouch-coll-'));
});
test.after(async () => {
  fs.rmSync(localDir, { recursive: true, force: true });
  await server.stop();
});

function remote(name) {
  return new PouchDB(`${server.url}/${encodeURIComponent(name)}`, {
    auth: { username: ADMIN_USER, password: ADMIN_PASSWORD },
    skip_setup: true,
  });
}

test('nano sees a collection as a database of its own', async () => {
  const dbs = await nano.db.list();
  assert.ok(dbs.includes(COLLECTION), JSON.stringify(dbs));
  const coll = nano.use(COLLECTION);
  await coll.insert({ v: 'collection' }, 'same-key');
  await nano.use('travel').insert({ v: 'default' }, 'same-key');
  assert.equal((await coll.get('same-key')).v, 'collection');
  assert.equal((await nano.use('travel').get('same-key')).v, 'default');
  const info = await nano.db.get(COLLECTION);
  assert.equal(info.db_name, COLLECTION);
  assert.equal(info.doc_count, 1);
  const changes = await coll.changes();
  assert.deepEqual(changes.results.map((row) => row.id), ['same-key']);
  await assert.rejects(nano.db.create(COLLECTION), (error) => error.statusCode === 412);
});

test('PouchDB replicates one collection, and only it, both ways', async () => {
  const source = remote(COLLECTION);
  await source.bulkDocs([{ _id: 'c1', n: 1 }, { _id: 'c2', n: 2 }]);
  await nano.use('travel').insert({ n: 'not in the collection' }, 'd1');
  const local = new PouchDB(path.join(localDir, 'pull'));
  const pulled = await PouchDB.replicate(source, local);
  assert.equal(pulled.ok, true);
  const ids = (await local.allDocs()).rows.map((row) => row.id);
  assert.deepEqual(ids, ['c1', 'c2', 'same-key']);
  // The checkpoint lives in the collection's _local documents: a second pull takes the new
  // document only.
  await source.put({ _id: 'c3', n: 3 });
  const again = await PouchDB.replicate(source, local);
  assert.equal(again.docs_written, 1);
  // Pushing into another collection leaves the first and the bucket as they were.
  await nano.db.create('travel$inventory$route');
  const target = remote('travel$inventory$route');
  const pushed = await PouchDB.replicate(local, target);
  assert.equal(pushed.docs_written, 4);
  assert.equal((await target.allDocs()).total_rows, 4);
  assert.equal((await source.allDocs()).total_rows, 4);
  assert.equal((await nano.db.get('travel')).doc_count, 2);
  await local.destroy();
});

test('a dropped collection is gone, and its name comes back empty', async () => {
  await nano.db.destroy('travel$inventory$route');
  assert.ok(!(await nano.db.list()).includes('travel$inventory$route'));
  await assert.rejects(nano.use('travel$inventory$route').get('c1'), (error) => error.statusCode === 404);
  await nano.db.create('travel$inventory$route');
  assert.equal((await nano.db.get('travel$inventory$route')).doc_count, 0);
  assert.equal((await nano.db.get('travel')).doc_count, 2);
});
