'use strict';
// Issue 18 point 7: a `_replicator` document's job runs with its owner's rights (the user who
// wrote it, recorded in `owner` as CouchDB records it), never as the first server admin. mel is
// a member of `open` and `mine` but not of `secret`: her document replicating `secret` crashes
// with CouchDB's "unauthorized" error and copies nothing, one writing into `secret` too; she may
// not name another user in `user_ctx` or claim another owner (403); her document replicating
// `open` completes. `POST /_replicate` runs as the requester whatever `user_ctx` it names.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http, withAuth } = require('./harness');

let server;
let admin;
let mel;
test.before(async () => {
  server = await start();
  admin = require('nano')(server.adminUrl);
  for (const db of ['open', 'mine', 'secret', 'admins-copy']) await admin.db.create(db);
  const members = { members: { names: ['mel'], roles: [] }, admins: { names: [], roles: [] } };
  for (const db of ['open', 'mine', '_replicator']) {
    const security = await http('PUT', `${server.url}/${db}/_security`, { body: members });
    assert.equal(security.status, 200);
  }
  await admin.use('_users').insert({ _id: 'org.couchdb.user:mel', name: 'mel', password: 'pw', roles: [], type: 'user' });
  await admin.use('secret').insert({ _id: 'classified', level: 'top' });
  await admin.use('open').insert({ _id: 'public', level: 'none' });
  mel = require('nano')(withAuth(server.url, 'mel', 'pw'));
});
test.after(async () => server.stop());

async function schedulerDoc(id, wanted) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const response = await http('GET', `${server.url}/_scheduler/docs/_replicator/${id}`);
    if (response.status === 200 && wanted(response.json)) return response.json;
    if (Date.now() > deadline) throw new Error(`${id}: ${response.text}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const crashedUnauthorized = (doc) => doc.state === 'crashing'
  && /^unauthorized: unauthorized to access or create database /.test(doc.info && doc.info.error);

test("a member's document runs with her rights, not an admin's", async () => {
  const written = await mel.use('_replicator').insert({ _id: 'steal', source: 'secret', target: 'mine' });
  assert.equal(written.ok, true);
  const stored = await admin.use('_replicator').get('steal');
  assert.equal(stored.owner, 'mel');
  const state = await schedulerDoc('steal', crashedUnauthorized);
  assert.match(state.info.error, /\/secret\/$/);
  await assert.rejects(admin.use('mine').get('classified'), (error) => error.statusCode === 404);
});

test('a member cannot write into a database she may not write', async () => {
  await mel.use('_replicator').insert({ _id: 'push', source: 'open', target: 'secret' });
  const state = await schedulerDoc('push', crashedUnauthorized);
  assert.match(state.info.error, /\/secret\/$/);
  await assert.rejects(admin.use('secret').get('public'), (error) => error.statusCode === 404);
});

test('a member may name only herself and own only her documents', async () => {
  const forbidden = (reason) => (error) => {
    assert.equal(error.statusCode, 403, String(error));
    assert.equal(error.error, 'forbidden');
    assert.equal(error.reason, reason);
    return true;
  };
  await assert.rejects(
    mel.use('_replicator').insert({ _id: 'as-admin', source: 'secret', target: 'mine', user_ctx: { name: 'admin', roles: ['_admin'] } }),
    forbidden("The given `user_ctx.name' is not valid"),
  );
  await assert.rejects(
    mel.use('_replicator').insert({ _id: 'forged', source: 'secret', target: 'mine', owner: 'admin' }),
    forbidden("Can't update replication documents from other users."),
  );
  const bulk = await mel.use('_replicator').bulk({ docs: [{ _id: 'bulk-forged', source: 'secret', target: 'mine', owner: 'admin' }] });
  assert.equal(bulk[0].error, 'forbidden');
  // The admin's own document: mel may neither change nor delete it.
  const admins = await admin.use('_replicator').insert({ _id: 'admins', source: 'secret', target: 'admins-copy' });
  await assert.rejects(
    mel.use('_replicator').insert({ _id: 'admins', _rev: admins.rev, source: 'secret', target: 'mine', owner: 'mel' }),
    forbidden("Can't update replication documents from other users."),
  );
  await assert.rejects(mel.use('_replicator').destroy('admins', admins.rev), forbidden("Can't update replication documents from other users."));
  for (const id of ['as-admin', 'forged', 'bulk-forged']) {
    await assert.rejects(admin.use('_replicator').get(id), (error) => error.statusCode === 404);
  }
  await assert.rejects(admin.use('mine').get('classified'), (error) => error.statusCode === 404);
});

test("a member's document over what she may read completes; an admin's runs as the admin", async () => {
  await mel.use('_replicator').insert({ _id: 'fine', source: 'open', target: 'mine', user_ctx: { name: 'mel', roles: [] } });
  const state = await schedulerDoc('fine', (doc) => doc.state === 'completed');
  assert.equal(state.state, 'completed');
  assert.equal((await admin.use('mine').get('public')).level, 'none');
  await schedulerDoc('admins', (doc) => doc.state === 'completed');
  assert.equal((await admin.use('admins-copy').get('classified')).level, 'top');
});

test('POST /_replicate runs as the requester whatever user_ctx it names', async () => {
  const response = await http('POST', `${server.url}/_replicate`, {
    user: 'mel',
    password: 'pw',
    body: { source: 'secret', target: 'mine', user_ctx: { name: 'admin', roles: ['_admin'] } },
  });
  assert.equal(response.status, 401, response.text);
  assert.equal(response.json.error, 'unauthorized');
  await assert.rejects(admin.use('mine').get('classified'), (error) => error.statusCode === 404);
});
