'use strict';
// Issue 18 (leftovers, point 4): CouchDB's `after_doc_read` for `_replicator`. mel and alice are
// members of `_replicator`; alice's replication document names its peers with credentials
// (userinfo in a URL, an Authorization header, an `auth` object). mel is shown that document
// without them, under a revision made up for that body, on every read path: GET (with revs,
// open_revs), _all_docs, _bulk_get, _changes, a view and _find with their documents; and a
// selector or filter cannot match on what she is not shown. alice (its owner) and the server
// admin see it whole.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http, withAuth } = require('./harness');

const SECRET = 's3cret';
const TOKEN = 'Basic YWxpY2U6czNjcmV0';
// Port 1 refuses connections: the replication never reaches anything.
const stored = {
  _id: 'alices',
  source: `http://alice:${SECRET}@127.0.0.1:1/source-db`,
  target: {
    url: 'http://127.0.0.1:1/target-db',
    headers: { Authorization: TOKEN },
    auth: { basic: { username: 'alice', password: SECRET } },
  },
  continuous: false,
};

let server;
let admin;
let mel;
let alice;
test.before(async () => {
  server = await start();
  admin = require('nano')(server.adminUrl);
  const members = { members: { names: ['mel', 'alice'], roles: [] }, admins: { names: [], roles: [] } };
  const security = await http('PUT', `${server.url}/_replicator/_security`, { body: members });
  assert.equal(security.status, 200);
  for (const name of ['mel', 'alice']) {
    await admin.use('_users').insert({ _id: `org.couchdb.user:${name}`, name, password: 'pw', roles: [], type: 'user' });
  }
  mel = require('nano')(withAuth(server.url, 'mel', 'pw'));
  alice = require('nano')(withAuth(server.url, 'alice', 'pw'));
  const written = await alice.use('_replicator').insert(stored);
  assert.equal(written.ok, true);
  await admin.use('_replicator').insert({
    _id: '_design/listing',
    views: { ids: { map: 'function (doc) { if (doc.source) emit(doc._id, null); }' } },
  });
});
test.after(async () => server.stop());

// The credentials are nowhere in what mel is shown, and the rest is.
function assertHidden(doc, where) {
  const text = JSON.stringify(doc);
  assert.ok(!text.includes(SECRET), `${where}: ${text}`);
  assert.ok(!text.includes(TOKEN), `${where}: ${text}`);
  assert.equal(doc.source, 'http://127.0.0.1:1/source-db', where);
  assert.deepEqual(doc.target, { url: 'http://127.0.0.1:1/target-db' }, where);
  assert.equal(doc.owner, 'alice', where);
}

async function storedRev() {
  return (await admin.use('_replicator').get('alices'))._rev;
}

test('the owner and the server admin see the credentials', async () => {
  for (const [who, client] of [['alice', alice], ['admin', admin]]) {
    const doc = await client.use('_replicator').get('alices');
    assert.equal(doc.source, stored.source, who);
    assert.deepEqual(doc.target, stored.target, who);
  }
});

test('another member reading the document is shown it without credentials', async () => {
  const before = await storedRev();
  const doc = await mel.use('_replicator').get('alices');
  const rev = await storedRev();
  assertHidden(doc, 'GET');
  // A revision of its own (CouchDB's), at the same position as the stored one.
  assert.notEqual(doc._rev, rev);
  if (before === rev) assert.equal(doc._rev.split('-')[0], rev.split('-')[0]);
  const withRevs = await mel.use('_replicator').get('alices', { revs: true, revs_info: true });
  assertHidden(withRevs, 'GET revs=true');
  assert.equal(withRevs._revisions.ids[0], doc._rev.split('-')[1]);
  assert.equal(withRevs._revs_info[0].rev, doc._rev);
  const openRevs = await http('GET', `${server.url}/_replicator/alices?open_revs=all`, {
    user: 'mel', password: 'pw', headers: { accept: 'application/json' },
  });
  assert.equal(openRevs.status, 200, openRevs.text);
  assertHidden(openRevs.json[0].ok, 'open_revs');
  const bulk = await http('POST', `${server.url}/_replicator/_bulk_get`, {
    user: 'mel', password: 'pw', body: { docs: [{ id: 'alices' }] },
  });
  assert.equal(bulk.status, 200, bulk.text);
  assertHidden(bulk.json.results[0].docs[0].ok, '_bulk_get');
});

test('every listing with documents hides them too', async () => {
  const db = mel.use('_replicator');
  const all = await db.list({ include_docs: true });
  const row = all.rows.find((candidate) => candidate.id === 'alices');
  assertHidden(row.doc, '_all_docs');
  const changes = await db.changes({ include_docs: true });
  const change = changes.results.find((candidate) => candidate.id === 'alices');
  assertHidden(change.doc, '_changes');
  const view = await db.view('listing', 'ids', { include_docs: true });
  assert.equal(view.rows.length, 1);
  assertHidden(view.rows[0].doc, 'view include_docs');
  const found = await db.find({ selector: { _id: 'alices' } });
  assert.equal(found.docs.length, 1);
  assertHidden(found.docs[0], '_find');
});

test('selectors cannot match what the reader is not shown', async () => {
  const db = mel.use('_replicator');
  const bySecret = { source: { $regex: SECRET } };
  assert.equal((await db.find({ selector: bySecret })).docs.length, 0);
  const feed = await http('POST', `${server.url}/_replicator/_changes?filter=_selector`, {
    user: 'mel', password: 'pw', body: { selector: bySecret },
  });
  assert.equal(feed.status, 200, feed.text);
  assert.equal(feed.json.results.length, 0, feed.text);
  // The admin's selector does match: the document has them.
  const adminFound = await admin.use('_replicator').find({ selector: bySecret });
  assert.equal(adminFound.docs.length, 1);
});

