'use strict';
// Issue 18 point 10: failed logins are limited as CouchDB 3.4+ limits them
// ([chttpd_auth_lockout], mode enforce, threshold 5). After 5 wrong passwords for a user from one
// address, that user's logins from there are refused with CouchDB's 403, the right password
// included, by Basic auth and by POST /_session alike, until the lifetime of the first failure
// ends (shortened here to a few seconds); other users are not affected.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

const LIFETIME_MS = 6000;
const LOCKED = { error: 'forbidden', reason: 'Account is temporarily locked due to multiple authentication failures' };

let server;
test.before(async () => {
  server = await start({ env: { SETTEE_AUTH_LOCKOUT_MAX_LIFETIME: String(LIFETIME_MS) } });
  for (const name of ['lou', 'max', 'sal']) {
    const created = await http('PUT', `${server.url}/_users/org.couchdb.user:${name}`, {
      body: { name, password: `${name}-pw`, roles: [], type: 'user' },
    });
    assert.equal(created.status, 201, created.text);
  }
});
test.after(async () => server.stop());

const basic = (name, password) => http('GET', `${server.url}/_session`, { user: name, password });
const session = (name, password) => http('POST', `${server.url}/_session`, { user: null, body: { name, password } });

test('five wrong passwords lock the user out, the right one included, until the lifetime ends', async () => {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const wrong = await basic('lou', 'guess');
    assert.equal(wrong.status, 401, wrong.text);
  }
  const right = await basic('lou', 'lou-pw');
  assert.equal(right.status, 403, right.text);
  assert.deepEqual(right.json, LOCKED);
  const login = await session('lou', 'lou-pw');
  assert.equal(login.status, 403, login.text);
  assert.deepEqual(login.json, LOCKED);
  // Another user from the same address, and the admin, are not affected.
  assert.equal((await basic('max', 'max-pw')).status, 200);
  assert.equal((await http('GET', `${server.url}/_all_dbs`)).status, 200);
  // Once the first failure is older than the lifetime, the right password works again.
  const deadline = Date.now() + LIFETIME_MS + 20000;
  for (;;) {
    const again = await basic('lou', 'lou-pw');
    if (again.status === 200) break;
    assert.equal(again.status, 403, again.text);
    assert.ok(Date.now() < deadline, 'still locked out long after the lifetime');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
});

test('wrong POST /_session logins count too', async () => {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const wrong = await session('sal', 'guess');
    assert.equal(wrong.status, 401, wrong.text);
    assert.equal(wrong.json.reason, 'Name or password is incorrect.');
  }
  const right = await basic('sal', 'sal-pw');
  assert.equal(right.status, 403, right.text);
  assert.deepEqual(right.json, LOCKED);
});
