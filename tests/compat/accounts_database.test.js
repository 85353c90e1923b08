'use strict';
// Issue 22 point 9: the accounts database as CouchDB 3.5 keeps it. Every accounts database
// gets `_design/_auth`, whose validate_doc_update holds the accounts' rules with CouchDB's
// answers; [chttpd_auth] authentication_db names another database to read accounts from;
// [admins] adds server admins at runtime (stored hashed); [chttpd_auth] password_regexp and
// [chttpd_auth_lockout] mode are read at runtime; a conflicted account cannot log in; anyone
// may sign up with POST /_users.
const test = require('node:test');
const assert = require('node:assert/strict');
const nano = require('nano');
const { CLUSTER, start, http } = require('./harness');

let server;
// The configuration is per node in settee (as in CouchDB): in a cluster (SETTEE_CLUSTER) it is
// set on every node, as an operator sets it; node 1's answer is the one checked.
const onEvery = async (request) => (await Promise.all(server.nodes.map(request)))[0];
const config = (section, key, value) => onEvery((node) => http('PUT', `${node.url}/_node/_local/_config/${section}/${key}`, { body: JSON.stringify(value) }));
const unset = (section, key) => onEvery((node) => http('DELETE', `${node.url}/_node/_local/_config/${section}/${key}`));
const whoami = (user, password) => http('GET', `${server.url}/_session`, { user, password });
const account = (name, extra = {}) => ({ _id: `org.couchdb.user:${name}`, type: 'user', name, password: `${name}-pw`, roles: [], ...extra });

test.before(async () => { server = await start(); });
test.after(async () => server.stop());

test('_users has _design/_auth, whose rules answer as CouchDB does', async () => {
  const ddoc = await http('GET', `${server.url}/_users/_design/_auth`);
  assert.equal(ddoc.status, 200, ddoc.text);
  assert.match(ddoc.json.validate_doc_update, /^function/);
  const users = nano(server.adminUrl).use('_users');
  const refusals = [
    [{ ...account('ann'), type: 'person' }, 'doc.type must be user'],
    [{ ...account('ann'), roles: 'all' }, 'doc.roles must be an array'],
    [{ ...account('ann'), roles: [12] }, 'doc.roles can only contain strings'],
    [{ ...account('ann'), _id: 'org.couchdb.user:bob' }, 'Doc ID must be of the form org.couchdb.user:name'],
    [account('joe:erlang'), 'Character `:` is not allowed in usernames.'],
    [account('_system'), 'Username may not start with underscore.'],
    [account('ann', { roles: ['_admin'] }), 'No system roles (starting with underscore) in users db.'],
  ];
  for (const [doc, reason] of refusals) {
    await assert.rejects(users.insert(doc), (error) => {
      assert.equal(error.statusCode, 403, reason);
      assert.equal(error.reason, reason);
      return true;
    });
  }
});

test('anyone signs up with POST /_users, but not with roles; "_:_" is nobody', async () => {
  const signup = await http('POST', `${server.url}/_users`, { user: null, body: account('sue') });
  assert.equal(signup.status, 201, signup.text);
  const raised = await http('POST', `${server.url}/_users`, { user: null, body: account('eve', { roles: ['boss'] }) });
  assert.equal(raised.status, 403, raised.text);
  assert.equal(raised.json.reason, 'Only _admin may set roles');
  const me = await whoami('sue', 'sue-pw');
  assert.equal(me.json.userCtx.name, 'sue');
  assert.equal(me.json.info.authentication_db, '_users');
  // A user may change their own password, but not their roles.
  const own = (await http('GET', `${server.url}/_users/org.couchdb.user:sue`, { user: 'sue', password: 'sue-pw' })).json;
  const promoted = await http('PUT', `${server.url}/_users/org.couchdb.user:sue`, { user: 'sue', password: 'sue-pw', body: { ...own, roles: ['boss'] } });
  assert.equal(promoted.status, 403, promoted.text);
  assert.equal(promoted.json.reason, 'Only _admin may edit roles');
  const nobody = await http('GET', `${server.url}/_session`, { user: '_', password: '_' });
  assert.equal(nobody.status, 200, nobody.text);
  assert.equal(nobody.json.userCtx.name, null);
});

// In a cluster the accounts database is on every node, every vbucket active on the node that
// created it (where the setting is), so logins and the accounts' rules hold through any node.
test('[chttpd_auth] authentication_db reads accounts from another database', async () => {
  const admin = nano(server.adminUrl);
  assert.equal((await config('chttpd_auth', 'authentication_db', 'accounts')).status, 200);
  try {
    // Created after the setting: it gets _design/_auth at once, as CouchDB's does.
    await admin.db.create('accounts');
    const ddoc = await http('GET', `${server.url}/accounts/_design/_auth`);
    assert.equal(ddoc.status, 200, ddoc.text);
    const saved = await admin.use('accounts').insert(account('ada'));
    assert.equal(saved.ok, true);
    const stored = await admin.use('accounts').get('org.couchdb.user:ada');
    assert.equal(stored.password, undefined);
    assert.equal(stored.password_scheme, 'pbkdf2');
    const me = await whoami('ada', 'ada-pw');
    assert.equal(me.status, 200, me.text);
    assert.equal(me.json.userCtx.name, 'ada');
    assert.equal(me.json.info.authentication_db, 'accounts');
    // Its listing is for its admins, as a system database's.
    const listing = await http('GET', `${server.url}/accounts/_all_docs`, { user: 'ada', password: 'ada-pw' });
    assert.equal(listing.status, 403, listing.text);
    assert.equal(listing.json.reason, 'Only admins can access _all_docs of system databases.');
    // _users' accounts no longer log in.
    assert.equal((await whoami('sue', 'sue-pw')).status, 401);
    // Its accounts follow the accounts' rules there too.
    const raised = await http('POST', `${server.url}/accounts`, { user: null, body: account('eve', { roles: ['boss'] }) });
    assert.equal(raised.status, 403, raised.text);
  } finally {
    await unset('chttpd_auth', 'authentication_db');
  }
  assert.equal((await whoami('sue', 'sue-pw')).status, 200);
  assert.equal((await whoami('ada', 'ada-pw')).status, 401);
});

test('[admins] adds and removes server admins at runtime, stored hashed', async () => {
  const added = await config('admins', 'jan', 'apple');
  assert.equal(added.status, 200, added.text);
  const stored = await http('GET', `${server.url}/_node/_local/_config/admins/jan`);
  assert.match(stored.json, /^-pbkdf2:sha256-[0-9a-f]+,[0-9a-f]+,\d+$/);
  const jan = await whoami('jan', 'apple');
  assert.deepEqual(jan.json.userCtx, { name: 'jan', roles: ['_admin'] });
  assert.equal((await http('GET', `${server.url}/_all_dbs`, { user: 'jan', password: 'apple' })).status, 200);
  assert.equal((await unset('admins', 'jan')).status, 200);
  assert.equal((await whoami('jan', 'apple')).status, 401);
});

test('[chttpd_auth_lockout] mode warn stops refusing at once', async () => {
  await nano(server.adminUrl).use('_users').insert(account('lou'));
  assert.equal((await config('chttpd_auth_lockout', 'mode', 'warn')).status, 200);
  try {
    for (let attempt = 0; attempt < 6; attempt += 1) {
      assert.equal((await whoami('lou', 'guess')).status, 401);
    }
  } finally {
    await unset('chttpd_auth_lockout', 'mode');
  }
  const locked = await whoami('lou', 'lou-pw');
  assert.equal(locked.status, 403, locked.text);
});

test('[chttpd_auth] password_regexp refuses passwords with its reasons', async () => {
  const rules = '[{".{10,}"}, {"[A-Z]+", "Requirement 2."}]';
  assert.equal((await config('chttpd_auth', 'password_regexp', rules)).status, 200);
  try {
    const short = await http('POST', `${server.url}/_users`, { body: account('pat', { password: 'short' }) });
    assert.equal(short.status, 400, short.text);
    assert.deepEqual(short.json, { error: 'bad_request', reason: 'Password does not conform to requirements.' });
    const lower = await http('POST', `${server.url}/_users`, { body: account('pat', { password: 'long enough' }) });
    assert.equal(lower.json.reason, 'Password does not conform to requirements. Requirement 2.');
    const good = await http('POST', `${server.url}/_users`, { body: account('pat', { password: 'Long Enough' }) });
    assert.equal(good.status, 201, good.text);
    assert.equal((await config('chttpd_auth', 'password_regexp', '{{".{10,}"}}')).status, 200);
    const broken = await http('POST', `${server.url}/_users`, { body: account('kim') });
    assert.equal(broken.status, 403, broken.text);
    assert.deepEqual(broken.json, { error: 'forbidden', reason: 'Server cannot hash passwords at this time.' });
  } finally {
    await unset('chttpd_auth', 'password_regexp');
  }
});

test('an account with conflicting revisions cannot log in', async () => {
  const users = nano(server.adminUrl).use('_users');
  const saved = await users.insert(account('cory'));
  assert.equal((await whoami('cory', 'cory-pw')).status, 200);
  const current = await users.get('org.couchdb.user:cory');
  await users.insert({ ...current, other: 2 });
  // Another edit of the first revision, as replication brings one.
  const branch = { ...current, _rev: `2-${'a'.repeat(32)}`, _revisions: { start: 2, ids: ['a'.repeat(32), saved.rev.split('-')[1]] }, extra: 1 };
  const written = await http('POST', `${server.url}/_users/_bulk_docs`, { body: { docs: [branch], new_edits: false } });
  assert.equal(written.status, 201, written.text);
  const refused = await whoami('cory', 'cory-pw');
  assert.equal(refused.status, 401, refused.text);
  assert.match(refused.json.reason, /conflicts/);
});

test('a _security object whose names or roles are not strings is refused as CouchDB refuses it', async () => {
  await nano(server.adminUrl).db.create('secured');
  for (const members of [{ roles: ['a', { b: 1 }] }, { names: ['joe', 22] }, { names: 'joe' }]) {
    const answer = await http('PUT', `${server.url}/secured/_security`, { body: { members } });
    assert.equal(answer.status, 500, answer.text);
    assert.deepEqual(answer.json, { error: 'error', reason: 'no_majority' });
  }
});
