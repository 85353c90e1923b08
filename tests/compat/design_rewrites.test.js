'use strict';
// Issue 22 point 5: `/db/_design/ddoc/_rewrite/...` as CouchDB 3.5 serves it. The design
// document's `rewrites` (an array of rules, or a JavaScript function) make another request,
// dispatched again as the same user: rules with `:var`, `*` and query substitution, a
// function's path, query, method and body, its early response, `..` paths out of the design
// document and the database (not past the server root), loop detection with
// `[chttpd] rewrite_limit`, and a database whose name holds `/`.
const test = require('node:test');
const assert = require('node:assert/strict');
const nano = require('nano');
const { start, http } = require('./harness');

let server;
let client;

const TEXT = 'This is a base64 encoded text';
const ATTACHMENTS = {
  'foo.txt': { content_type: 'text/plain', data: Buffer.from(TEXT).toString('base64') },
};

const RULES_DDOC = {
  _id: '_design/app',
  _attachments: ATTACHMENTS,
  rewrites: [
    { from: 'foo', to: 'foo.txt' },
    { from: 'hello/:id', to: '_update/hello/:id', method: 'PUT' },
    { from: '/welcome/:name', to: '_show/welcome', query: { name: ':name' } },
    { from: '/fixed', to: '_view/numbers', query: { startkey: 3, endkey: 5 } },
    { from: '/range/:from/:to', to: '_view/numbers',
      query: { startkey: ':from', endkey: ':to' }, formats: { from: 'int', to: 'int' } },
    { from: '/', to: '_view/numbers' },
    { from: '/db/*', to: '../../*' },
  ],
  shows: { welcome: 'function(doc, req) { return "Welcome " + req.query.name; }' },
  updates: {
    hello: 'function(doc, req) { if (!doc) return [{_id: req.id, world: "new"}, "New World"];'
      + ' doc.world = "hello"; return [doc, "hello doc"]; }',
  },
  views: { numbers: { map: 'function(doc) { if (doc.n) emit(doc.n, null); }' } },
};

const FUNCTION_DDOC = {
  _id: '_design/fn',
  _attachments: ATTACHMENTS,
  rewrites: `function(req) {
    var prefix = req.path[4];
    if (prefix === 'foo') return 'foo.txt';
    if (prefix === 'welcome') return {path: '_show/welcome', query: {name: req.path[5]}};
    if (prefix === 'status') {
      var status = parseInt(req.query.status);
      return {code: status, body: JSON.stringify({status: status}),
              headers: {'x-foo': 'bar', 'Content-Type': 'application/json'}};
    }
    if (prefix === 'changes') return {path: '../../_changes', query: {filter: '_doc_ids'}};
    if (prefix === 'keys') {
      return {path: '_view/numbers', method: 'POST', headers: {'Content-Type': 'application/json'},
              body: JSON.stringify({keys: [4]})};
    }
  };`,
  shows: RULES_DDOC.shows,
  views: RULES_DDOC.views,
};

const setConfig = (key, value) =>
  client.request({ method: 'PUT', path: `_node/_local/_config/chttpd/${key}`, body: value });

async function seed(name) {
  await client.db.create(name);
  const db = client.use(name);
  await db.insert(RULES_DDOC);
  await db.insert(FUNCTION_DDOC);
  await db.bulk({ docs: [1, 2, 3, 4, 5, 6].map((n) => ({ _id: `n${n}`, n })) });
  return db;
}

const rewrite = (db, ddoc, rest, options = {}) =>
  client.request({ db, path: `_design/${ddoc}/_rewrite/${rest}`, ...options });

test.before(async () => {
  server = await start();
  client = nano(server.adminUrl);
});
test.after(async () => {
  await server.stop();
});

for (const name of ['rewrites', 'rewrites/with_slashes']) {
  test(`rules: paths, bindings, query values, methods and ../ on ${name}`, async () => {
    const db = await seed(name);
    assert.equal(await rewrite(name, 'app', 'foo'), TEXT);
    assert.equal(await rewrite(name, 'app', 'welcome/user'), 'Welcome user');
    assert.equal(await rewrite(name, 'app', 'hello/doc1', { method: 'PUT' }), 'New World');
    assert.equal(await rewrite(name, 'app', 'hello/doc1', { method: 'PUT' }), 'hello doc');
    assert.equal((await db.get('doc1')).world, 'hello');
    const all = await rewrite(name, 'app', '');
    assert.equal(all.total_rows, 6);
    const fixed = await rewrite(name, 'app', 'fixed', { qs: { startkey: 1 } });
    assert.deepEqual(fixed.rows.map((row) => row.key), [3, 4, 5]);
    const range = await rewrite(name, 'app', 'range/2/3');
    assert.deepEqual(range.rows.map((row) => row.key), [2, 3]);
    // `..` leaves the design document: the database's own documents and endpoints.
    assert.equal((await rewrite(name, 'app', 'db/n1')).n, 1);
    const meta = await rewrite(name, 'app', 'db/_design/app', { qs: { meta: true } });
    assert.equal(meta._id, '_design/app');
    assert.ok(Array.isArray(meta._revs_info));
    // No rule matches: CouchDB's 404.
    await assert.rejects(rewrite(name, 'app', 'nothing/here'), (error) =>
      error.statusCode === 404 && error.error === 'not_found');
    // A PUT-only rule does not match a GET.
    await assert.rejects(rewrite(name, 'app', 'hello/doc1'), (error) => error.statusCode === 404);
  });

  test(`a rewrite function: paths, query, method and body, early responses on ${name}`, async () => {
    assert.equal(await rewrite(name, 'fn', 'foo'), TEXT);
    assert.equal(await rewrite(name, 'fn', 'welcome/user'), 'Welcome user');
    const early = await http('GET',
      `${server.url}/${encodeURIComponent(name)}/_design/fn/_rewrite/status?status=451`);
    assert.equal(early.status, 451);
    assert.equal(early.headers.get('x-foo'), 'bar');
    assert.deepEqual(early.json, { status: 451 });
    // A request with a body keeps it, and the function's query string is used.
    const changes = await rewrite(name, 'fn', 'changes', {
      method: 'POST', body: { doc_ids: ['n2'] },
    });
    assert.deepEqual(changes.results.map((row) => row.id), ['n2']);
    // The function turns a GET into a POST with its own body.
    const keyed = await rewrite(name, 'fn', 'keys');
    assert.deepEqual(keyed.rows.map((row) => row.key), [4]);
    // The function returns nothing: CouchDB's 404 rewrite_error.
    await assert.rejects(rewrite(name, 'fn', 'other'), (error) =>
      error.statusCode === 404 && error.error === 'rewrite_error'
      && error.reason === 'Invalid path.');
  });
}

test('paths relative to the server: two ../ at most unless secure_rewrites is off', async () => {
  await client.db.create('relative');
  const db = client.use('relative');
  await db.insert({ _id: '_design/up', rewrites: [{ from: 'uuids', to: '../../../_uuids' }] });
  await db.insert({ _id: '_design/above', rewrites: [{ from: 'x', to: '../../../../x' }] });
  await assert.rejects(rewrite('relative', 'up', 'uuids'), (error) =>
    error.statusCode === 500 && error.error === 'insecure_rewrite_rule'
    && error.reason === 'too many ../.. segments');
  await setConfig('secure_rewrites', 'false');
  try {
    assert.equal((await rewrite('relative', 'up', 'uuids')).uuids.length, 1);
    // Past the server root is refused, even with secure_rewrites off.
    await assert.rejects(rewrite('relative', 'above', 'x'), (error) => error.statusCode === 400);
  } finally {
    await setConfig('secure_rewrites', 'true');
  }
});

test('loops stop at rewrite_limit; serial and chained rewrites within it are served', async () => {
  await client.db.create('loops');
  const db = client.use('loops');
  await db.insert({ _id: '_design/loop', rewrites: [{ from: 'loop', to: '_rewrite/loop' }] });
  await db.insert({ _id: '_design/jsloop', rewrites: 'function(req) { return "_rewrite/loop"; }' });
  await db.insert({ _id: '_design/one', _attachments: ATTACHMENTS, rewrites: [{ from: 'foo', to: 'foo.txt' }] });
  // `two` rewrites to `one`'s _rewrite: two rewrites for one request.
  await db.insert({ _id: '_design/two', rewrites: [{ from: 'foo', to: '../one/_rewrite/foo' }] });
  for (const ddoc of ['loop', 'jsloop']) {
    await assert.rejects(rewrite('loops', ddoc, 'loop'), (error) =>
      error.statusCode === 400 && error.error === 'bad_request'
      && error.reason === 'Exceeded rewrite recursion limit');
  }
  await setConfig('rewrite_limit', '2');
  try {
    for (let i = 0; i < 5; i += 1) assert.equal(await rewrite('loops', 'one', 'foo'), TEXT);
    assert.equal(await rewrite('loops', 'two', 'foo'), TEXT);
    await setConfig('rewrite_limit', '1');
    await assert.rejects(rewrite('loops', 'two', 'foo'), (error) => error.statusCode === 400);
    assert.equal(await rewrite('loops', 'one', 'foo'), TEXT);
  } finally {
    await setConfig('rewrite_limit', '100');
  }
});

test('the rewritten request runs as the same user', async () => {
  await client.db.create('public');
  await client.db.create('private');
  await client.use('private').insert({ _id: 'secret', v: 1 });
  await client.request({
    db: 'private', method: 'PUT', path: '_security',
    body: { members: { names: ['nobody-yet'], roles: [] } },
  });
  await client.use('public').insert({
    _id: '_design/peek', rewrites: 'function(req) { return "../../../private/secret"; }',
  });
  await client.request({
    db: 'public', method: 'PUT', path: '_security',
    body: { members: { names: [], roles: [] }, admins: { names: [], roles: [] } },
  });
  // Anyone may read the design document, not what its rewrite points at.
  const ddoc = await http('GET', `${server.url}/public/_design/peek`, { user: null });
  assert.equal(ddoc.status, 200);
  const anonymous = await http('GET', `${server.url}/public/_design/peek/_rewrite/x`, { user: null });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.json.error, 'unauthorized');
  assert.equal((await rewrite('public', 'peek', 'x')).v, 1);
});
