'use strict';
// validate_doc_update as CouchDB applications use it: nano's writes get the function's
// verdicts (forbidden 403, unauthorized 401) with their reasons, bulk writes one per document,
// and PouchDB replicating into a database with a validation function sees the refused
// documents as per-document errors while the others arrive.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

const VALIDATE = `function (newDoc, oldDoc, userCtx) {
  if (newDoc._deleted) { return; }
  if (!newDoc.owner) { throw({forbidden: 'a document needs an owner'}); }
  if (newDoc.owner !== userCtx.name && userCtx.roles.indexOf('_admin') < 0) {
    throw({unauthorized: 'only ' + newDoc.owner + ' may write this'});
  }
  if (oldDoc && oldDoc.owner !== newDoc.owner) { throw({forbidden: 'the owner cannot change'}); }
}`;

let server;
let nano;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('vdu');
  await nano.use('vdu').insert({ validate_doc_update: VALIDATE }, '_design/owners');
});
test.after(async () => {
  await server.stop();
});

test('nano writes get the validation function\'s verdicts', async () => {
  const db = nano.use('vdu');
  await assert.rejects(db.insert({ x: 1 }, 'orphan'), (error) => {
    assert.equal(error.statusCode, 403);
    assert.equal(error.error, 'forbidden');
    assert.equal(error.reason, 'a document needs an owner');
    return true;
  });
  const saved = await db.insert({ owner: 'alice' }, 'mine');
  await assert.rejects(db.insert({ owner: 'bob', _rev: saved.rev }, 'mine'), (error) => {
    assert.equal(error.statusCode, 403);
    assert.equal(error.reason, 'the owner cannot change');
    return true;
  });
  const rows = await db.bulk({ docs: [{ _id: 'b1', owner: 'alice' }, { _id: 'b2' }] });
  assert.equal(rows[0].ok, true);
  assert.deepEqual(rows[1], { id: 'b2', error: 'forbidden', reason: 'a document needs an owner' });
  // A user who is not the owner: 401 from the function, not from the database's security.
  await nano.request({ db: '_users', method: 'PUT', doc: 'org.couchdb.user:bob',
    body: { name: 'bob', password: 'pw', roles: [], type: 'user' } });
  await nano.request({ db: 'vdu', method: 'PUT', path: '_security',
    body: { members: { names: ['bob'], roles: [] } } });
  const bobUrl = new URL(server.url);
  bobUrl.username = 'bob';
  bobUrl.password = 'pw';
  const bob = require('nano')(bobUrl.toString().replace(/\/$/, '')).use('vdu');
  await assert.rejects(bob.insert({ owner: 'alice' }, 'not-bobs'), (error) => {
    assert.equal(error.statusCode, 401);
    assert.equal(error.reason, 'only alice may write this');
    return true;
  });
  assert.equal((await bob.insert({ owner: 'bob' }, 'bobs')).ok, true);
});

test('PouchDB replication into a validated database: refused documents are reported, the rest arrive', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-pouch-vdu-'));
  const local = new PouchDB(path.join(dir, 'source'));
  await local.bulkDocs([{ _id: 'r1', owner: 'carol' }, { _id: 'r2' }, { _id: 'r3', owner: 'dan' }]);
  const remote = new PouchDB(`${server.url}/vdu`, {
    auth: { username: ADMIN_USER, password: ADMIN_PASSWORD },
    skip_setup: true,
  });
  const result = await local.replicate.to(remote);
  assert.equal(result.docs_written, 2, JSON.stringify(result));
  assert.equal(result.doc_write_failures, 1, JSON.stringify(result));
  const db = nano.use('vdu');
  assert.equal((await db.get('r1')).owner, 'carol');
  await assert.rejects(db.get('r2'), (error) => error.statusCode === 404);
  await local.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});
