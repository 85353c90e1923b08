// JavaScript views through PouchDB's http adapter (db.query) and plain HTTP: map and reduce
// results, collation order, group levels, keys and ranges, descending, skip/limit,
// include_docs, update modes, the CouchDB error bodies, and the JS sandbox's limits.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let db;
let base;

const ddoc = {
  _id: '_design/app',
  views: {
    by_type: {
      map: 'function (doc) { if (doc.type) { emit([doc.type, doc.year, doc.n], doc.n); } }',
      reduce: '_sum',
    },
    by_name: {
      map: 'function (doc) { if (doc.name) { emit(doc.name, {_id: doc.owner || doc._id}); } }',
    },
    counted: {
      map: 'function (doc) { if (doc.type) { emit(doc.type, 1); } }',
      reduce: '_count',
    },
    stats: {
      map: 'function (doc) { if (doc.type) { emit(doc.type, doc.n); } }',
      reduce: '_stats',
    },
    js_reduce: {
      map: 'function (doc) { if (doc.type) { emit(doc.type, doc.n); } }',
      reduce: 'function (keys, values, rereduce) { return rereduce ? sum(values) : values.length * 100 + sum(values); }',
    },
    with_lib: {
      map: 'function (doc) { var lib = require("views/lib/shout"); if (doc.name) { emit(lib.shout(doc.name), null); } }',
    },
    lib: { shout: 'exports.shout = function (s) { return s.toUpperCase(); };' },
  },
};

const docs = [];
for (let n = 0; n < 30; n += 1) {
  docs.push({ _id: `doc-${String(n).padStart(2, '0')}`, type: n % 3 === 0 ? 'report' : 'contact', year: 2020 + (n % 2), n });
}
docs.push({ _id: 'person-a', name: 'bob' }, { _id: 'person-b', name: 'Bob' }, { _id: 'person-c', name: 'alice', owner: 'doc-01' });
docs.push({ _id: 'person-d', name: 'ärger' }, { _id: 'person-e', name: 'zed' });

test.before(async () => {
  server = await start();
  base = `${server.url}/views`;
  await http('PUT', base);
  db = new PouchDB(base, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  await db.put(ddoc);
  await db.bulkDocs(docs);
});
test.after(async () => server.stop());

test('map rows sorted by ICU collation, ids breaking ties, total_rows and offset', async () => {
  const result = await db.query('app/by_name', { reduce: false });
  assert.deepEqual(result.rows.map((row) => row.key), ['alice', 'ärger', 'bob', 'Bob', 'zed']);
  assert.equal(result.total_rows, 5);
  assert.equal(result.offset, 0);
  const from = await db.query('app/by_name', { startkey: 'b' });
  assert.deepEqual(from.rows.map((row) => row.key), ['bob', 'Bob', 'zed']);
  assert.equal(from.offset, 2);
  const shouted = await db.query('app/with_lib');
  assert.deepEqual(shouted.rows.map((row) => row.key), ['ALICE', 'ÄRGER', 'BOB', 'BOB', 'ZED']);
  assert.deepEqual(shouted.rows.slice(2, 4).map((row) => row.id), ['person-a', 'person-b']);
});

test('ranges, descending, inclusive_end, skip and limit, startkey_docid', async () => {
  const range = await db.query('app/by_type', { reduce: false, startkey: ['report'], endkey: ['report', {}] });
  assert.equal(range.rows.length, 10);
  assert.ok(range.rows.every((row) => row.key[0] === 'report'));
  const desc = await db.query('app/by_type', { reduce: false, descending: true, startkey: ['report', {}], endkey: ['report'], limit: 3 });
  assert.deepEqual(desc.rows.map((row) => row.value), [27, 21, 15]);
  const paged = await db.query('app/by_type', { reduce: false, skip: 2, limit: 2 });
  const all = await db.query('app/by_type', { reduce: false });
  assert.deepEqual(paged.rows, all.rows.slice(2, 4));
  const exclusive = await db.query('app/by_name', { startkey: 'alice', endkey: 'bob', inclusive_end: false });
  assert.deepEqual(exclusive.rows.map((row) => row.key), ['alice', 'ärger']);
  const byDocid = await http('GET', `${base}/_design/app/_view/with_lib?key=%22BOB%22&startkey_docid=person-b`);
  assert.deepEqual(byDocid.json.rows.map((row) => row.id), ['person-b']);
});

test('key and keys (GET and POST), in the order asked', async () => {
  const one = await db.query('app/by_name', { key: 'zed' });
  assert.deepEqual(one.rows.map((row) => row.id), ['person-e']);
  const many = await db.query('app/by_name', { keys: ['zed', 'alice', 'nobody'] });
  assert.deepEqual(many.rows.map((row) => row.key), ['zed', 'alice']);
  const posted = await http('POST', `${base}/_design/app/_view/by_name`, { body: { keys: ['bob', 'zed'] } });
  assert.equal(posted.status, 200);
  assert.deepEqual(posted.json.rows.map((row) => row.id), ['person-a', 'person-e']);
});

test('reduce: _sum with group levels, _count, _stats, JavaScript reduce with rereduce', async () => {
  const total = await db.query('app/by_type');
  assert.deepEqual(total.rows, [{ key: null, value: 435 }]);
  const level1 = await db.query('app/by_type', { group_level: 1 });
  assert.deepEqual(level1.rows, [{ key: ['contact'], value: 300 }, { key: ['report'], value: 135 }]);
  const level2 = await db.query('app/by_type', { group_level: 2 });
  assert.equal(level2.rows.length, 4);
  assert.deepEqual(level2.rows[0], { key: ['contact', 2020], value: 150 });
  const counted = await db.query('app/counted', { group: true });
  assert.deepEqual(counted.rows, [{ key: 'contact', value: 20 }, { key: 'report', value: 10 }]);
  const stats = await db.query('app/stats', { key: 'report' });
  assert.deepEqual(stats.rows[0].value, { sum: 135, count: 10, min: 0, max: 27, sumsqr: 2565 });
  const js = await db.query('app/js_reduce', { group: true });
  assert.deepEqual(js.rows, [{ key: 'contact', value: 2300 }, { key: 'report', value: 1135 }]);
  const grouped = await db.query('app/counted', { keys: ['report'], group: true });
  assert.deepEqual(grouped.rows, [{ key: 'report', value: 10 }]);
});

test('include_docs, linked documents, conflicts', async () => {
  const result = await db.query('app/by_name', { include_docs: true, keys: ['alice', 'zed'] });
  assert.equal(result.rows[0].doc._id, 'doc-01', 'a value {_id} links another document');
  assert.equal(result.rows[1].doc._id, 'person-e');
  assert.equal(result.rows[1].doc.name, 'zed');
  assert.match(result.rows[1].doc._rev, /^1-/);
  const bad = await http('GET', `${base}/_design/app/_view/counted?include_docs=true`);
  assert.equal(bad.status, 400);
  assert.deepEqual(bad.json, { error: 'query_parse_error', reason: '`include_docs` is invalid for reduce' });
});

test('updates and deletions show up; stale modes answer from the index as it is', async () => {
  const doc = await db.get('person-e');
  await db.put({ ...doc, name: 'aaron' });
  const updated = await db.query('app/by_name');
  assert.deepEqual(updated.rows.map((row) => row.key), ['aaron', 'alice', 'ärger', 'bob', 'Bob']);
  await db.remove(await db.get('person-a'));
  await db.put({ _id: 'person-f', name: 'yves' });
  // The index may or may not have caught up in the background: either state is a valid answer.
  const stale = await db.query('app/by_name', { stale: 'ok' });
  const known = new Set(['person-a', 'person-b', 'person-c', 'person-d', 'person-e', 'person-f']);
  assert.ok(stale.rows.every((row) => known.has(row.id)));
  const fresh = await db.query('app/by_name', { update_seq: true });
  assert.deepEqual(fresh.rows.map((row) => row.key), ['aaron', 'alice', 'ärger', 'Bob', 'yves']);
  assert.equal(typeof fresh.update_seq, 'string');
  const lazy = await http('GET', `${base}/_design/app/_view/by_name?update=lazy`);
  assert.equal(lazy.status, 200);
});

test('errors: missing view, missing design, bad parameters, grouping a map view', async () => {
  const missing = await http('GET', `${base}/_design/app/_view/nope`);
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.json, { error: 'not_found', reason: 'missing_named_view' });
  const noDesign = await http('GET', `${base}/_design/nope/_view/x`);
  assert.equal(noDesign.status, 404);
  assert.deepEqual(noDesign.json, { error: 'not_found', reason: 'missing' });
  await assert.rejects(db.query('app/nope'), (error) => error.status === 404);
  const badLimit = await http('GET', `${base}/_design/app/_view/by_name?limit=x`);
  assert.equal(badLimit.status, 400);
  assert.equal(badLimit.json.error, 'query_parse_error');
  const grouping = await http('GET', `${base}/_design/app/_view/by_name?group=true`);
  assert.deepEqual(grouping.json, { error: 'query_parse_error', reason: 'Invalid use of grouping on a map view.' });
  const reversed = await http('GET', `${base}/_design/app/_view/by_name?startkey=%22z%22&endkey=%22a%22`);
  assert.equal(reversed.status, 400);
  assert.match(reversed.json.reason, /No rows can match your key range/);
  const badSum = await http('PUT', `${base}/_design/badsum`, { body: { views: { v: { map: 'function (doc) { emit(doc._id, "text"); }', reduce: '_sum' } } } });
  assert.equal(badSum.status, 201);
  const summed = await http('GET', `${base}/_design/badsum/_view/v`);
  assert.equal(summed.status, 500);
  assert.equal(summed.json.error, 'builtin_reduce_error');
});

test('design documents whose functions do not compile are refused at PUT', async () => {
  const syntax = await http('PUT', `${base}/_design/broken`, { body: { views: { v: { map: 'function (doc) { emit(doc._id ' } } } });
  assert.equal(syntax.status, 400);
  assert.equal(syntax.json.error, 'compilation_error');
  assert.match(syntax.json.reason, /^Compilation of the map function in the 'v' view failed/);
  const shape = await http('PUT', `${base}/_design/broken`, { body: { views: { v: { map: 42 } } } });
  assert.deepEqual(shape.json, { error: 'invalid_design_doc', reason: '`views.v.map` field must have string type' });
  const reducer = await http('PUT', `${base}/_design/broken`, { body: { views: { v: { map: 'function (doc) {}', reduce: '_median' } } } });
  assert.deepEqual(reducer.json, { error: 'invalid_design_doc', reason: '`_median` is not a supported reduce function.' });
  await assert.rejects(db.put({ _id: '_design/broken', views: { v: { map: 'not a function' } } }), (error) => error.status === 400);
});

test('a function followed by a semicolon is accepted, as CouchDB 3.5 accepts it', async () => {
  await db.put({ _id: '_design/semi', views: { v: { map: 'function (doc) { if (doc.type) emit(doc.n, 1); };', reduce: 'function (keys, values) { return sum(values); };' } } });
  const reduced = await db.query('semi/v');
  assert.equal(reduced.rows[0].value, 30);
  const rows = await db.query('semi/v', { reduce: false, limit: 2 });
  assert.deepEqual(rows.rows.map((row) => row.key), [0, 1]);
});

test('a map function that throws skips that document only', async () => {
  await db.put({ _id: '_design/throws', views: { v: { map: 'function (doc) { if (doc.n === 3) { throw new Error("no"); } if (doc.type) emit(doc.n, null); }' } } });
  const result = await db.query('throws/v');
  assert.equal(result.rows.length, 29);
  assert.ok(!result.rows.some((row) => row.key === 3));
});

test('queries endpoint and the queries body form', async () => {
  const body = { queries: [{ keys: ['bob', 'Bob'] }, { startkey: 'y', limit: 1 }] };
  const viaPath = await http('POST', `${base}/_design/app/_view/by_name/queries`, { body });
  assert.equal(viaPath.status, 200);
  assert.equal(viaPath.json.results.length, 2);
  assert.deepEqual(viaPath.json.results[0].rows.map((row) => row.key), ['Bob']);
  assert.deepEqual(viaPath.json.results[1].rows.map((row) => row.key), ['yves']);
  const viaBody = await http('POST', `${base}/_design/app/_view/by_name`, { body });
  assert.deepEqual(viaBody.json, viaPath.json);
});

test('_info, _design_docs, _view_cleanup and _active_tasks', async () => {
  const info = await http('GET', `${base}/_design/app/_info`);
  assert.equal(info.status, 200);
  assert.equal(info.json.name, 'app');
  assert.match(info.json.view_index.signature, /^[0-9a-f]{32}$/);
  const designs = await http('GET', `${base}/_design_docs`);
  assert.ok(designs.json.rows.some((row) => row.id === '_design/app'));
  const cleanup = await http('POST', `${base}/_view_cleanup`, { body: {} });
  assert.equal(cleanup.status, 202);
  assert.deepEqual(cleanup.json, { ok: true });
  const stillThere = await db.query('app/by_name', { stale: 'ok' });
  assert.ok(stillThere.rows.length > 0, 'cleanup keeps indexes design documents use');
  const tasks = await http('GET', `${server.url}/_active_tasks`);
  assert.equal(tasks.status, 200);
  assert.ok(Array.isArray(tasks.json));
});

test('sandbox: an endless loop and a memory hog fail with an error and the server keeps serving', async () => {
  await db.put({ _id: '_design/loop', views: { v: { map: 'function (doc) { while (true) {} }' } } });
  const looped = await http('GET', `${base}/_design/loop/_view/v`);
  assert.equal(looped.status, 500);
  assert.equal(looped.json.error, 'os_process_error');
  assert.match(looped.json.reason, /time limit/);
  await db.put({ _id: '_design/hog', views: { v: { map: 'function (doc) { var all = []; while (true) { all.push(new Array(100000).fill(doc)); } }' } } });
  const hog = await http('GET', `${base}/_design/hog/_view/v`);
  assert.equal(hog.status, 500);
  assert.equal(hog.json.error, 'os_process_error');
  assert.match(hog.json.reason, /memory/);
  const fine = await db.query('app/counted', { group: true });
  assert.equal(fine.rows.length, 2);
});
