'use strict';
// Issue 22 point 9: proxy authentication as CouchDB 3.5 does it ({chttpd_auth,
// proxy_authentication_handler}): a proxy names the user in X-Auth-CouchDB-UserName and their
// roles in X-Auth-CouchDB-Roles, and with [chttpd_auth] proxy_use_secret (settee's default:
// true) proves it knows [chttpd_auth] secret with X-Auth-CouchDB-Token, the hex HMAC of the
// name (SHA-256 or SHA-1, [chttpd_auth] hash_algorithms). Until a secret is set, settee trusts
// no proxy; with proxy_use_secret = false it trusts the headers alone, as CouchDB does.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { start, http } = require('./harness');

const SECRET = 'a-proxy-secret-of-some-length';
let server;

const config = (section, key, value) => http('PUT', `${server.url}/_node/_local/_config/${section}/${key}`, { body: JSON.stringify(value) });
const unset = (section, key) => http('DELETE', `${server.url}/_node/_local/_config/${section}/${key}`);
const token = (hash, name, secret = SECRET) => crypto.createHmac(hash, secret).update(name).digest('hex');
const asProxy = (headers) => http('GET', `${server.url}/_session`, { user: null, headers });

const ALL_HANDLERS = '{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}';

// The proxy handler is listed as CouchDB's own test configuration lists it (the default list
// is CouchDB's cookie and default).
test.before(async () => {
  server = await start();
  assert.equal((await config('chttpd', 'authentication_handlers', ALL_HANDLERS)).status, 200);
});
test.after(async () => server.stop());

test('without a secret no proxy is trusted', async () => {
  const answer = await asProxy({ 'X-Auth-CouchDB-UserName': 'mallory', 'X-Auth-CouchDB-Roles': '_admin' });
  assert.equal(answer.status, 200, answer.text);
  assert.equal(answer.json.userCtx.name, null);
  assert.ok(answer.json.info.authentication_handlers.includes('proxy'));
  const dbs = await http('GET', `${server.url}/_all_dbs`, { user: null, headers: { 'X-Auth-CouchDB-UserName': 'mallory', 'X-Auth-CouchDB-Roles': '_admin' } });
  assert.equal(dbs.status, 401, dbs.text);
});

test('with the secret a token of the name is needed', async () => {
  assert.equal((await config('chttpd_auth', 'secret', SECRET)).status, 200);
  for (const hash of ['sha256', 'sha1']) {
    const answer = await asProxy({
      'X-Auth-CouchDB-UserName': 'couch@apache.org',
      'X-Auth-CouchDB-Roles': 'role_a, role_b',
      'X-Auth-CouchDB-Token': token(hash, 'couch@apache.org'),
    });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.json.userCtx, { name: 'couch@apache.org', roles: ['role_a', 'role_b'] });
    assert.equal(answer.json.info.authenticated, 'proxy');
  }
  for (const wrong of [token('sha256', 'someone else'), token('sha256', 'couch@apache.org', 'other secret'), undefined]) {
    const headers = { 'X-Auth-CouchDB-UserName': 'couch@apache.org' };
    if (wrong) headers['X-Auth-CouchDB-Token'] = wrong;
    const answer = await asProxy(headers);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.userCtx.name, null);
  }
  // The server admin role through a trusted proxy opens admin endpoints.
  const dbs = await http('GET', `${server.url}/_all_dbs`, {
    user: null,
    headers: { 'X-Auth-CouchDB-UserName': 'ops', 'X-Auth-CouchDB-Roles': '_admin', 'X-Auth-CouchDB-Token': token('sha256', 'ops') },
  });
  assert.equal(dbs.status, 200, dbs.text);
});

test('proxy_use_secret = false trusts the headers alone; the header names are settings', async () => {
  assert.equal((await config('chttpd_auth', 'proxy_use_secret', 'false')).status, 200);
  try {
    const answer = await asProxy({ 'X-Auth-CouchDB-UserName': 'couch@apache.org', 'X-Auth-CouchDB-Roles': 'test_role_1,test_role_2' });
    assert.deepEqual(answer.json.userCtx, { name: 'couch@apache.org', roles: ['test_role_1', 'test_role_2'] });
    assert.equal(answer.json.info.authenticated, 'proxy');
    assert.equal((await config('chttpd_auth', 'x_auth_username', 'X-Remote-User')).status, 200);
    const renamed = await asProxy({ 'X-Remote-User': 'carol' });
    assert.equal(renamed.json.userCtx.name, 'carol');
    const old = await asProxy({ 'X-Auth-CouchDB-UserName': 'couch@apache.org' });
    assert.equal(old.json.userCtx.name, null);
  } finally {
    await unset('chttpd_auth', 'x_auth_username');
    await unset('chttpd_auth', 'proxy_use_secret');
  }
  const refused = await config('chttpd_auth', 'proxy_use_secret', 'maybe');
  assert.equal(refused.status, 400, refused.text);
});

test('without the proxy handler in authentication_handlers the headers are ignored', async () => {
  const handlers = '{chttpd_auth, cookie_authentication_handler}, {couch_httpd_auth, default_authentication_handler}';
  assert.equal((await config('chttpd', 'authentication_handlers', handlers)).status, 200);
  assert.deepEqual((await asProxy({})).json.info.authentication_handlers, ['cookie', 'default']);
  try {
    const answer = await asProxy({ 'X-Auth-CouchDB-UserName': 'ops', 'X-Auth-CouchDB-Token': token('sha256', 'ops') });
    assert.equal(answer.json.userCtx.name, null);
    assert.deepEqual(answer.json.info.authentication_handlers, ['cookie', 'default']);
    // Basic still works: the default handler is listed.
    assert.equal((await http('GET', `${server.url}/_all_dbs`)).status, 200);
  } finally {
    await unset('chttpd', 'authentication_handlers');
  }
  // Unset, the list is CouchDB's default: still no proxy.
  const unsetAnswer = await asProxy({ 'X-Auth-CouchDB-UserName': 'ops', 'X-Auth-CouchDB-Token': token('sha256', 'ops') });
  assert.equal(unsetAnswer.json.userCtx.name, null);
  assert.equal((await config('chttpd', 'authentication_handlers', ALL_HANDLERS)).status, 200);
  // Listed again: the same request is the proxy's user again.
  const again = await asProxy({ 'X-Auth-CouchDB-UserName': 'ops', 'X-Auth-CouchDB-Token': token('sha256', 'ops') });
  assert.equal(again.json.userCtx.name, 'ops');
  assert.deepEqual(again.json.info.authentication_handlers, ['jwt', 'proxy', 'cookie', 'default']);
});
