'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
const { start, http } = require('./harness');

let server;
let nano;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('private');
  await nano.db.create('shared');
  await nano.use('shared').insert({ _id: '_security', members: { names: ['bob'], roles: [] }, admins: { names: [], roles: [] } })
    .catch(async () => http('PUT', `${server.url}/shared/_security`, { body: { members: { names: ['bob'], roles: [] }, admins: { names: [], roles: [] } } }));
});
test.after(async () => server.stop());

test('new databases are admin-only: anonymous 401, wrong password 401', async () => {
  const anonymous = await http('GET', `${server.url}/private`, { user: null });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.json.error, 'unauthorized');
  const wrong = await http('GET', `${server.url}/private`, { password: 'nope' });
  assert.equal(wrong.status, 401);
  assert.deepEqual(wrong.json, { error: 'unauthorized', reason: 'Name or password is incorrect.' });
  const allDbs = await http('GET', `${server.url}/_all_dbs`, { user: null });
  assert.equal(allDbs.status, 401);
});

test('a _users user logs in by basic auth and by cookie, and gets member access only', async () => {
  const created = await http('PUT', `${server.url}/_users/org.couchdb.user:bob`, {
    body: { name: 'bob', password: 'pw', roles: [], type: 'user' },
  });
  assert.equal(created.status, 201);
  // The stored document holds a PBKDF2 hash, never the password.
  const stored = await http('GET', `${server.url}/_users/org.couchdb.user:bob`);
  assert.equal(stored.json.password, undefined);
  assert.equal(stored.json.password_scheme, 'pbkdf2');
  assert.match(stored.json.derived_key, /^[0-9a-f]+$/);
  // Basic auth.
  const member = await http('PUT', `${server.url}/shared/doc`, { body: { by: 'bob' }, user: 'bob', password: 'pw' });
  assert.equal(member.status, 201);
  const forbidden = await http('GET', `${server.url}/private`, { user: 'bob', password: 'pw' });
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.json.error, 'forbidden');
  const notAdmin = await http('PUT', `${server.url}/bobs-db`, { user: 'bob', password: 'pw' });
  assert.equal(notAdmin.status, 401);
  assert.deepEqual(notAdmin.json, { error: 'unauthorized', reason: 'You are not a server admin.' });
  const designByMember = await http('PUT', `${server.url}/shared/_design/x`, { body: {}, user: 'bob', password: 'pw' });
  assert.equal(designByMember.status, 403);
  // Cookie session.
  const login = await http('POST', `${server.url}/_session`, { body: { name: 'bob', password: 'pw' }, user: null });
  assert.equal(login.status, 200);
  assert.deepEqual(login.json, { ok: true, name: 'bob', roles: [] });
  const cookie = login.headers.get('set-cookie').split(';')[0];
  assert.match(cookie, /^AuthSession=/);
  const session = await http('GET', `${server.url}/_session`, { user: null, headers: { cookie } });
  assert.equal(session.json.userCtx.name, 'bob');
  assert.equal(session.json.info.authenticated, 'cookie');
  const viaCookie = await http('GET', `${server.url}/shared/doc`, { user: null, headers: { cookie } });
  assert.equal(viaCookie.status, 200);
  const badLogin = await http('POST', `${server.url}/_session`, { body: { name: 'bob', password: 'wrong' }, user: null });
  assert.equal(badLogin.status, 401);
  // PouchDB with credentials.
  const pouch = new PouchDB(`${server.url}/shared`, { auth: { username: 'bob', password: 'pw' } });
  assert.equal((await pouch.get('doc')).by, 'bob');
  const denied = new PouchDB(`${server.url}/private`, { auth: { username: 'bob', password: 'pw' } });
  await assert.rejects(denied.info(), (error) => error.status === 403);
});

test('nano.auth (cookie) and session as admin', async () => {
  const client = require('nano')({ url: server.url });
  const answer = await client.auth('admin', 'secret');
  assert.equal(answer.ok, true);
  assert.ok(answer.roles.includes('_admin'));
});
