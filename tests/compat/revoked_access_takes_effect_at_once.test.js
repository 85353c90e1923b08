'use strict';
// Issue 18 point 6: changes to users count from the next request. Basic credentials of a
// deleted user answer 401 at once, and a role taken away answers 403 at once (settee used to
// cache verified credentials for 60 s); an AuthSession cookie is signed with the user's salt as
// CouchDB signs it, so a new password makes the old cookie worthless (401 on a protected db).
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http, withAuth } = require('./harness');

let server;
let admin;
test.before(async () => {
  server = await start();
  admin = require('nano')(server.adminUrl);
  await admin.db.create('guarded');
  const security = await http('PUT', `${server.url}/guarded/_security`, {
    body: { members: { names: ['dave'], roles: ['readers'] }, admins: { names: [], roles: [] } },
  });
  assert.equal(security.status, 200);
  await admin.use('guarded').insert({ _id: 'doc', n: 1 });
});
test.after(async () => server.stop());

async function createUser(name, password, roles = []) {
  const users = admin.use('_users');
  const id = `org.couchdb.user:${name}`;
  const current = await users.get(id).catch(() => null);
  return users.insert({ _id: id, ...(current ? { _rev: current._rev } : {}), name, password, roles, type: 'user' });
}

test('Basic credentials of a deleted user are refused at once', async () => {
  await createUser('dave', 'pw');
  const dave = require('nano')(withAuth(server.url, 'dave', 'pw')).use('guarded');
  assert.equal((await dave.get('doc')).n, 1);
  const user = await admin.use('_users').get('org.couchdb.user:dave');
  await admin.use('_users').destroy(user._id, user._rev);
  await assert.rejects(dave.get('doc'), (error) => {
    assert.equal(error.statusCode, 401, String(error));
    assert.equal(error.reason, 'Name or password is incorrect.');
    return true;
  });
});

test('a role taken away counts from the next request', async () => {
  await createUser('erin', 'pw', ['readers']);
  const erin = require('nano')(withAuth(server.url, 'erin', 'pw')).use('guarded');
  assert.equal((await erin.get('doc')).n, 1);
  const user = await admin.use('_users').get('org.couchdb.user:erin');
  await admin.use('_users').insert({ ...user, roles: [] });
  await assert.rejects(erin.get('doc'), (error) => {
    assert.equal(error.statusCode, 403, String(error));
    assert.equal(error.error, 'forbidden');
    return true;
  });
});

test('a session cookie dies with a password change', async () => {
  await createUser('fred', 'old', ['readers']);
  const login = await http('POST', `${server.url}/_session`, { body: { name: 'fred', password: 'old' }, user: null });
  assert.equal(login.status, 200);
  const cookie = login.headers.get('set-cookie').split(';')[0];
  const before = await http('GET', `${server.url}/guarded/doc`, { user: null, headers: { cookie } });
  assert.equal(before.status, 200, before.text);
  await createUser('fred', 'new', ['readers']);
  const after = await http('GET', `${server.url}/guarded/doc`, { user: null, headers: { cookie } });
  assert.equal(after.status, 401, after.text);
  assert.equal(after.json.error, 'unauthorized');
  const session = await http('GET', `${server.url}/_session`, { user: null, headers: { cookie } });
  assert.equal(session.json.userCtx.name, null);
  // The new password works, by Basic auth and by a new cookie.
  const basic = await http('GET', `${server.url}/guarded/doc`, { user: 'fred', password: 'new' });
  assert.equal(basic.status, 200, basic.text);
  const relogin = await http('POST', `${server.url}/_session`, { body: { name: 'fred', password: 'new' }, user: null });
  const fresh = relogin.headers.get('set-cookie').split(';')[0];
  const withFresh = await http('GET', `${server.url}/guarded/doc`, { user: null, headers: { cookie: fresh } });
  assert.equal(withFresh.status, 200, withFresh.text);
});
