'use strict';
// Issue 18 point 5: one authorisation decision for every operation. bob is a member of `shared`
// but not one of its admins: every way of writing a design document answers 403 and changes
// nothing (PUT, POST, _bulk_docs, COPY, an attachment, and settee's sub-document _mutate, which
// used to let him through), while he may still read design documents. The admin may write them.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http, withAuth } = require('./harness');

let server;
let admin;
let bob;
test.before(async () => {
  server = await start();
  admin = require('nano')(server.adminUrl);
  await admin.db.create('shared');
  const security = await http('PUT', `${server.url}/shared/_security`, {
    body: { members: { names: ['bob'], roles: [] }, admins: { names: [], roles: [] } },
  });
  assert.equal(security.status, 200);
  await admin.use('_users').insert({ _id: 'org.couchdb.user:bob', name: 'bob', password: 'pw', roles: [], type: 'user' });
  await admin.use('shared').insert({ _id: '_design/app', views: {}, by: 'admin' });
  await admin.use('shared').insert({ _id: 'plain', by: 'admin' });
  bob = require('nano')(withAuth(server.url, 'bob', 'pw')).use('shared');
});
test.after(async () => server.stop());

async function designUnchanged() {
  const ddoc = await admin.use('shared').get('_design/app');
  assert.equal(ddoc.by, 'admin');
  assert.equal(ddoc._rev.split('-')[0], '1');
  assert.equal(ddoc._attachments, undefined);
}

function forbidden(error) {
  assert.equal(error.statusCode, 403, String(error));
  assert.equal(error.error, 'forbidden');
  return true;
}

test('a member writes documents but no design document through nano', async () => {
  const plain = await bob.insert({ _id: 'bobs', by: 'bob' });
  assert.equal(plain.ok, true);
  const current = await bob.get('_design/app');
  await assert.rejects(bob.insert({ ...current, by: 'bob' }), forbidden);
  await assert.rejects(bob.insert({ _id: '_design/new', views: {} }), forbidden);
  await assert.rejects(bob.destroy('_design/app', current._rev), forbidden);
  await assert.rejects(
    bob.attachment.insert('_design/app', 'a.txt', Buffer.from('x'), 'text/plain', { rev: current._rev }),
    forbidden,
  );
  const bulk = await bob.bulk({ docs: [{ _id: '_design/bulk', views: {} }, { _id: 'bulk-plain' }] });
  assert.equal(bulk[0].error, 'forbidden');
  assert.equal(bulk[1].ok, true);
  await assert.rejects(admin.use('shared').get('_design/new'), (error) => error.statusCode === 404);
  await assert.rejects(admin.use('shared').get('_design/bulk'), (error) => error.statusCode === 404);
  await designUnchanged();
});

test('a member cannot COPY onto a design document', async () => {
  const copied = await http('COPY', `${server.url}/shared/plain`, {
    user: 'bob', password: 'pw', headers: { destination: '_design/copied' },
  });
  assert.equal(copied.status, 403, copied.text);
  const missing = await http('GET', `${server.url}/shared/_design/copied`);
  assert.equal(missing.status, 404);
});

test('a member cannot edit a design document through _mutate', async () => {
  const mutate = await http('POST', `${server.url}/shared/${encodeURIComponent('_design/app')}/_mutate`, {
    user: 'bob',
    password: 'pw',
    body: { specs: [{ op: 'upsert', path: 'by', value: 'bob' }] },
  });
  assert.equal(mutate.status, 403, mutate.text);
  assert.equal(mutate.json.error, 'forbidden');
  await designUnchanged();
});

test('a member may read design documents; the admin may write them', async () => {
  const read = await bob.get('_design/app');
  assert.equal(read.by, 'admin');
  const lookup = await http('POST', `${server.url}/shared/${encodeURIComponent('_design/app')}/_lookup`, {
    user: 'bob', password: 'pw', body: { specs: [{ op: 'get', path: 'by' }] },
  });
  assert.equal(lookup.status, 200, lookup.text);
  const written = await admin.use('shared').insert({ _id: '_design/by-admin', views: {} });
  assert.equal(written.ok, true);
  const mutated = await http('POST', `${server.url}/shared/${encodeURIComponent('_design/by-admin')}/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'note', value: 1 }] },
  });
  assert.equal(mutated.status, 201, mutated.text);
});
