'use strict';
// Issue 22 point 9: JSON Web Tokens as CouchDB 3.5 checks them ({chttpd_auth,
// jwt_authentication_handler}, listed in [chttpd] authentication_handlers here as CouchDB's
// own test configuration lists it; the default is CouchDB's cookie and default). Keys
// are set through /_node/_local/_config under CouchDB's names ([jwt_keys] hmac:_default,
// rsa:KID, ec:KID, PEM with its line breaks written as \n); tokens are signed here with
// node's crypto: HS256/384/512, RS256 by kid, and ES256/384/512 as CouchDB's jwtf makes them
// (the name chooses the hash whatever the curve, r and s as long as the name says).
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const nano = require('nano');
const { start, http } = require('./harness');

const SECRET = 'zxczxc12zxczxc12';
let server;
let rsa;
let ec;

const b64url = (value) => Buffer.from(value).toString('base64url');
const config = (section, key, value) => http('PUT', `${server.url}/_node/_local/_config/${section}/${encodeURIComponent(key)}`, { body: JSON.stringify(value) });
const pemForConfig = (key) => key.export({ type: 'spki', format: 'pem' }).trim().replace(/\n/g, '\\n');
const now = () => Math.floor(Date.now() / 1000);

function token(header, claims, sign) {
  const message = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  return `${message}.${b64url(sign(Buffer.from(message)))}`;
}
const hmac = (hash, key = SECRET) => (data) => crypto.createHmac(hash, key).update(data).digest();
const rsaSign = (hash) => (data) => crypto.sign(hash, data, rsa.privateKey);
// jwtf's ES signature: r || s, each `bytes` long (ES256: 32, ES384: 48, ES512: 64).
const ecSign = (hash, bytes) => (data) => {
  const raw = crypto.sign(hash, data, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' });
  const half = raw.length / 2;
  const pad = (part) => Buffer.concat([Buffer.alloc(bytes - half), part]);
  return Buffer.concat([pad(raw.subarray(0, half)), pad(raw.subarray(half))]);
};
const claims = (extra = {}) => ({ sub: 'couch@apache.org', nbf: now() - 60, exp: now() + 60, '_couchdb.roles': ['testing'], ...extra });
const session = (jwt) => http('GET', `${server.url}/_session`, { user: null, headers: { authorization: `Bearer ${jwt}` } });
const ALL_HANDLERS = '{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}';

test.before(async () => {
  server = await start();
  rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  for (const [section, key, value] of [
    ['chttpd', 'authentication_handlers', ALL_HANDLERS],
    ['jwt_keys', 'hmac:_default', Buffer.from(SECRET).toString('base64')],
    ['jwt_keys', 'rsa:rsa1', pemForConfig(rsa.publicKey)],
    ['jwt_keys', 'ec:_default', pemForConfig(ec.publicKey)],
  ]) {
    const set = await config(section, key, value);
    assert.equal(set.status, 200, set.text);
  }
});
test.after(async () => server.stop());

test('HMAC tokens name the user and their roles', async () => {
  for (const [alg, hash] of [['HS256', 'sha256'], ['HS384', 'sha384'], ['HS512', 'sha512']]) {
    const answer = await session(token({ alg, typ: 'JWT' }, claims(), hmac(hash)));
    assert.equal(answer.status, 200, `${alg}: ${answer.text}`);
    assert.deepEqual(answer.json.userCtx, { name: 'couch@apache.org', roles: ['testing'] });
    assert.equal(answer.json.info.authenticated, 'jwt');
    assert.ok(answer.json.info.authentication_handlers.includes('jwt'));
  }
});

test('RSA tokens verify with the key their kid names', async () => {
  for (const [alg, hash] of [['RS256', 'sha256'], ['RS384', 'sha384'], ['RS512', 'sha512']]) {
    const answer = await session(token({ alg, kid: 'rsa1' }, claims(), rsaSign(hash)));
    assert.equal(answer.status, 200, `${alg}: ${answer.text}`);
    assert.equal(answer.json.userCtx.name, 'couch@apache.org');
  }
  // Without a kid the key is rsa:_default, which is not set.
  const unknown = await session(token({ alg: 'RS256' }, claims(), rsaSign('sha256')));
  assert.equal(unknown.status, 400, unknown.text);
  assert.deepEqual(unknown.json, { error: 'bad_request', reason: 'Unknown kid' });
});

test('EC tokens verify on a P-256 key whatever hash the name chooses', async () => {
  for (const [alg, hash, bytes] of [['ES256', 'sha256', 32], ['ES384', 'sha384', 48], ['ES512', 'sha512', 64]]) {
    const answer = await session(token({ alg, typ: 'JWT' }, claims(), ecSign(hash, bytes)));
    assert.equal(answer.status, 200, `${alg}: ${answer.text}`);
    assert.equal(answer.json.info.authenticated, 'jwt');
  }
});

test('bad signatures, expired tokens and tokens without sub are refused as CouchDB refuses them', async () => {
  const forged = await session(token({ alg: 'HS256' }, claims(), hmac('sha256', 'not the secret')));
  assert.equal(forged.status, 400, forged.text);
  assert.deepEqual(forged.json, { error: 'bad_request', reason: 'Bad HMAC' });
  const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const wrongKey = await session(token({ alg: 'RS256', kid: 'rsa1' }, claims(), (data) => crypto.sign('sha256', data, other.privateKey)));
  assert.equal(wrongKey.status, 400, wrongKey.text);
  assert.deepEqual(wrongKey.json, { error: 'bad_request', reason: 'Bad signature' });
  const expired = await session(token({ alg: 'HS256' }, claims({ exp: now() - 10 }), hmac('sha256')));
  assert.equal(expired.status, 401, expired.text);
  assert.deepEqual(expired.json, { error: 'unauthorized', reason: 'exp not in future' });
  const noExp = await session(token({ alg: 'HS256' }, { sub: 'a' }, hmac('sha256')));
  assert.equal(noExp.status, 400, noExp.text);
  assert.deepEqual(noExp.json, { error: 'bad_request', reason: 'Missing exp claim' });
  const noSub = await session(token({ alg: 'HS256' }, { exp: now() + 60 }, hmac('sha256')));
  assert.equal(noSub.status, 401, noSub.text);
  assert.deepEqual(noSub.json, { error: 'unauthorized', reason: 'Token missing sub claim.' });
  const malformed = await session('not-a-token');
  assert.equal(malformed.status, 400, malformed.text);
  assert.deepEqual(malformed.json, { error: 'bad_request', reason: 'Malformed token' });
});

test('[jwt_auth] required_claims and roles_claim_path are read at runtime', async () => {
  assert.equal((await config('jwt_auth', 'required_claims', '{iss, "hello"}')).status, 200);
  try {
    const good = await session(token({ alg: 'HS256' }, { iss: 'hello', sub: 'couch@apache.org', '_couchdb.roles': ['testing'] }, hmac('sha256')));
    assert.equal(good.status, 200, good.text);
    assert.deepEqual(good.json.userCtx.roles, ['testing']);
    const bad = await session(token({ alg: 'HS256' }, { iss: 'goodbye', sub: 'couch@apache.org' }, hmac('sha256')));
    assert.equal(bad.status, 400, bad.text);
    assert.deepEqual(bad.json, { error: 'bad_request', reason: 'Invalid iss claim' });
  } finally {
    await http('DELETE', `${server.url}/_node/_local/_config/jwt_auth/required_claims`);
  }
  assert.equal((await config('jwt_auth', 'roles_claim_path', 'app.couch\\.roles')).status, 200);
  try {
    const nested = await session(token({ alg: 'HS256' }, claims({ app: { 'couch.roles': 'r1, r2' } }), hmac('sha256')));
    assert.equal(nested.status, 200, nested.text);
    assert.deepEqual(nested.json.userCtx.roles, ['r1', 'r2']);
  } finally {
    await http('DELETE', `${server.url}/_node/_local/_config/jwt_auth/roles_claim_path`);
  }
});

test('a token user is authorised by its roles, through nano', async () => {
  const admin = nano(server.adminUrl);
  await admin.db.create('jwt_members');
  await admin.request({ db: 'jwt_members', path: '_security', method: 'PUT', body: { members: { roles: ['testing'] } } });
  const asToken = (roles) => nano({
    url: server.url,
    requestDefaults: { headers: { authorization: `Bearer ${token({ alg: 'HS256' }, claims({ '_couchdb.roles': roles }), hmac('sha256'))}` } },
  }).use('jwt_members');
  const saved = await asToken(['testing']).insert({ _id: 'by-token', ok: true });
  assert.equal(saved.ok, true);
  await assert.rejects(asToken(['other']).get('by-token'), (error) => error.statusCode === 403);
});

test('without the JWT handler (the default list) a Bearer token is ignored', async () => {
  await http('DELETE', `${server.url}/_node/_local/_config/chttpd/authentication_handlers`);
  try {
    const ignored = await session(token({ alg: 'HS256' }, claims(), hmac('sha256')));
    assert.equal(ignored.status, 200, ignored.text);
    assert.equal(ignored.json.userCtx.name, null);
    assert.deepEqual(ignored.json.info.authentication_handlers, ['cookie', 'default']);
  } finally {
    assert.equal((await config('chttpd', 'authentication_handlers', ALL_HANDLERS)).status, 200);
  }
  const refused = await config('chttpd', 'authentication_handlers', '{chttpd_auth, null_authentication_handler}');
  assert.equal(refused.status, 400, refused.text);
});
