'use strict';
// Issue 22 point 9: who reads what in an accounts database, and how passwords are hashed, as
// CouchDB 3.5 does it. Non-admins read their own account document only (another is 404
// `missing`, anonymous readers included), no design document and no view or list (403); only
// server admins read `_users/_all_docs` and `_users/_changes` (401). `[chttpd_auth]
// iterations` and `pbkdf2_prf` hash new passwords at once, and with `upgrade_hash_on_auth`
// (CouchDB's default) a password login re-hashes an older account with the same salt.
const test = require('node:test');
const assert = require('node:assert/strict');
const nano = require('nano');
const { start, http } = require('./harness');

let server;
const config = (section, key, value) => http('PUT', `${server.url}/_node/_local/_config/${section}/${key}`, { body: JSON.stringify(value) });
const account = (name) => ({ _id: `org.couchdb.user:${name}`, type: 'user', name, password: `${name}-pw`, roles: [] });
const as = (name) => ({ user: name, password: `${name}-pw` });

test.before(async () => {
  server = await start();
  const users = nano(server.adminUrl).use('_users');
  for (const name of ['tom', 'ann']) await users.insert(account(name));
  // Everyone a member, as CouchDB's _users is by default: the accounts' own rules decide.
  const security = await http('PUT', `${server.url}/_users/_security`, { body: { admins: { names: ['ann'], roles: [] } } });
  assert.equal(security.status, 200, security.text);
  await users.insert({ _id: '_design/people', views: { all: { map: 'function (doc) { emit(doc._id, null); }' } }, shows: { name: 'function (doc) { return doc ? doc.name : "nobody"; }' } });
});
test.after(async () => server.stop());

test('non-admins read their own account only; admins of the database read all', async () => {
  const own = await http('GET', `${server.url}/_users/org.couchdb.user:tom`, as('tom'));
  assert.equal(own.status, 200, own.text);
  const other = await http('GET', `${server.url}/_users/org.couchdb.user:ann`, as('tom'));
  assert.equal(other.status, 404, other.text);
  assert.deepEqual(other.json, { error: 'not_found', reason: 'missing' });
  const anonymous = await http('GET', `${server.url}/_users/org.couchdb.user:tom`, { user: null });
  assert.equal(anonymous.status, 404, anonymous.text);
  const byDbAdmin = await http('GET', `${server.url}/_users/org.couchdb.user:tom`, as('ann'));
  assert.equal(byDbAdmin.status, 200, byDbAdmin.text);
  // A show function sees no document the reader may not read.
  const shown = await http('GET', `${server.url}/_users/_design/people/_show/name/org.couchdb.user:ann`, as('tom'));
  assert.equal(shown.text, 'nobody');
  const ownShown = await http('GET', `${server.url}/_users/_design/people/_show/name/org.couchdb.user:tom`, as('tom'));
  assert.equal(ownShown.text, 'tom');
});

test('design documents, views, _all_docs and _changes are for admins', async () => {
  const forbidden = { error: 'forbidden', reason: 'Only administrators can view design docs in the users database.' };
  for (const path of ['_design/people', '_design/_auth', '_design/people/_view/all']) {
    const answer = await http('GET', `${server.url}/_users/${path}`, as('tom'));
    assert.equal(answer.status, 403, `${path}: ${answer.text}`);
    assert.deepEqual(answer.json, forbidden);
  }
  const view = await http('GET', `${server.url}/_users/_design/people/_view/all`, as('ann'));
  assert.equal(view.status, 200, view.text);
  for (const path of ['_all_docs', '_changes']) {
    for (const who of [as('tom'), as('ann'), { user: null }]) {
      const answer = await http('GET', `${server.url}/_users/${path}`, who);
      assert.equal(answer.status, 401, `${path}: ${answer.text}`);
      assert.deepEqual(answer.json, { error: 'unauthorized', reason: 'You are not a server admin.' });
    }
    assert.equal((await http('GET', `${server.url}/_users/${path}`)).status, 200);
  }
});

test('iterations and pbkdf2_prf hash new passwords at once; a login upgrades an older hash', async () => {
  const users = nano(server.adminUrl).use('_users');
  assert.equal((await config('chttpd_auth', 'iterations', '3')).status, 200);
  assert.equal((await config('chttpd_auth', 'pbkdf2_prf', 'sha512')).status, 200);
  await users.insert(account('sam'));
  const sam = await users.get('org.couchdb.user:sam');
  assert.equal(sam.iterations, 3);
  assert.equal(sam.pbkdf2_prf, 'sha512');
  assert.equal(sam.derived_key.length, 128);
  assert.equal((await http('GET', `${server.url}/_session`, as('sam'))).json.userCtx.name, 'sam');
  assert.equal((await config('chttpd_auth', 'pbkdf2_prf', 'bogus')).status, 400);
  // tom was hashed with the node's iterations and SHA-256: logging in upgrades him.
  const before = await users.get('org.couchdb.user:tom');
  const login = await http('POST', `${server.url}/_session`, { user: null, body: { name: 'tom', password: 'tom-pw' } });
  assert.equal(login.status, 200, login.text);
  const deadline = Date.now() + 30000;
  let after;
  for (;;) {
    after = await users.get('org.couchdb.user:tom');
    if (after.iterations === 3) break;
    assert.ok(Date.now() < deadline, 'the account was not upgraded');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.equal(after.pbkdf2_prf, 'sha512');
  assert.equal(after.salt, before.salt);
  assert.notEqual(after.derived_key, before.derived_key);
  assert.equal((await http('GET', `${server.url}/_session`, as('tom'))).json.userCtx.name, 'tom');
});
