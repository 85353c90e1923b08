// _find through pouchdb-find's db.find against a real settee: every operator family, implicit
// $eq/$and, nested and escaped fields, sort through an index, fields, limit/skip, bookmark
// paging, use_index, conflicts, and CouchDB's errors.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
PouchDB.plugin(require('pouchdb-find'));
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

const PEOPLE = [
  { _id: 'u01', name: { first: 'Ada', last: 'Lovelace' }, age: 36, city: 'London', tags: ['math', 'poetry'], manager: true, score: 9.5 },
  { _id: 'u02', name: { first: 'Alan', last: 'Turing' }, age: 41, city: 'London', tags: ['math', 'crypto'], manager: false, score: 9.9 },
  { _id: 'u03', name: { first: 'Grace', last: 'Hopper' }, age: 85, city: 'New York', tags: ['cobol', 'navy'], manager: true, score: 9.7 },
  { _id: 'u04', name: { first: 'Edsger', last: 'Dijkstra' }, age: 72, city: 'Austin', tags: ['algorithms'], score: 9.1 },
  { _id: 'u05', name: { first: 'Barbara', last: 'Liskov' }, age: 84, city: 'Boston', tags: ['types', 'distributed'], manager: true, score: 9.6 },
  { _id: 'u06', name: { first: 'Donald', last: 'Knuth' }, age: 86, city: 'Stanford', tags: ['algorithms', 'typesetting'], manager: false, score: 9.8 },
  { _id: 'u07', name: { first: 'Linus', last: 'Torvalds' }, age: 54, city: 'Portland', tags: [], manager: true },
  { _id: 'u08', name: { first: 'Margaret', last: 'Hamilton' }, age: 88, city: 'Boston', tags: ['apollo'], score: 9.4, nickname: null },
  { _id: 'u09', name: { first: 'Ken', last: 'Thompson' }, age: '81', city: 'Berkeley', tags: ['unix', 'go'] },
  { _id: 'u10', name: { first: 'Radia', last: 'Perlman' }, age: 73, city: 'Seattle', tags: ['networks'], prefs: { theme: 'dark', lang: 'en' }, 'dot.ted': 'yes' },
];

let server;
let db;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/people`);
  db = new PouchDB(`${server.url}/people`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  await db.bulkDocs(PEOPLE);
  await db.put({ _id: '_design/not-a-result', views: {} });
  const gone = await db.put({ _id: 'deleted', age: 40, city: 'London' });
  await db.remove('deleted', gone.rev);
});
test.after(async () => server.stop());

async function ids(selector, extra = {}) {
  const { docs } = await db.find({ selector, limit: 100, ...extra });
  return docs.map((doc) => doc._id);
}

test('equality, implicit $and, nested and escaped fields', async () => {
  assert.deepEqual(await ids({ city: 'London' }), ['u01', 'u02']);
  assert.deepEqual(await ids({ city: { $eq: 'London' }, manager: true }), ['u01']);
  assert.deepEqual(await ids({ 'name.first': 'Grace' }), ['u03']);
  assert.deepEqual(await ids({ name: { last: 'Knuth' } }), ['u06']);
  assert.deepEqual(await ids({ 'dot\\.ted': 'yes' }), ['u10']);
  assert.deepEqual(await ids({ nickname: null }), ['u08']);
  // Whole documents come back, with _id and _rev, never design or deleted documents.
  const { docs } = await db.find({ selector: { _id: 'u07' } });
  assert.equal(docs.length, 1);
  assert.match(docs[0]._rev, /^1-/);
  assert.deepEqual({ ...docs[0], _rev: undefined }, { ...PEOPLE[6], _rev: undefined });
  assert.deepEqual(await ids({ _id: { $gt: null } }), PEOPLE.map((doc) => doc._id));
});

test('comparisons collate across types', async () => {
  assert.deepEqual(await ids({ age: { $gt: 84 } }), ['u03', 'u06', 'u08', 'u09']);
  assert.deepEqual(await ids({ age: { $gte: 84, $lt: 86 } }), ['u03', 'u05']);
  assert.deepEqual(await ids({ age: { $lte: 41 } }), ['u01', 'u02']);
  assert.deepEqual(await ids({ age: { $ne: 36 } }).then((found) => found.length), 9);
  assert.deepEqual(await ids({ score: { $gt: 9.65 } }), ['u02', 'u03', 'u06']);
});

test('$exists, $type, $in, $nin, $size, $mod, $regex, $beginsWith', async () => {
  assert.deepEqual(await ids({ score: { $exists: false } }), ['u07', 'u09', 'u10']);
  assert.deepEqual(await ids({ age: { $type: 'string' } }), ['u09']);
  assert.deepEqual(await ids({ prefs: { $type: 'object' } }), ['u10']);
  assert.deepEqual(await ids({ city: { $in: ['Boston', 'Austin'] } }), ['u04', 'u05', 'u08']);
  // $in on an array field matches when any element is a value.
  assert.deepEqual(await ids({ tags: { $in: ['go', 'navy'] } }), ['u03', 'u09']);
  assert.deepEqual(await ids({ city: { $nin: ['London', 'Boston'] } }).then((found) => found.length), 6);
  assert.deepEqual(await ids({ tags: { $size: 0 } }), ['u07']);
  assert.deepEqual(await ids({ age: { $mod: [12, 0] } }), ['u01', 'u04', 'u05']);
  assert.deepEqual(await ids({ 'name.last': { $regex: '^T' } }), ['u02', 'u07', 'u09']);
  assert.deepEqual(await ids({ city: { $beginsWith: 'Bo' } }), ['u05', 'u08']);
});

test('$and, $or, $nor, $not', async () => {
  assert.deepEqual(await ids({ $and: [{ city: 'Boston' }, { manager: true }] }), ['u05']);
  assert.deepEqual(await ids({ $or: [{ city: 'Austin' }, { age: { $lt: 40 } }] }), ['u01', 'u04']);
  assert.deepEqual(
    await ids({ $nor: [{ city: 'London' }, { age: { $gt: 80 } }] }),
    ['u04', 'u07', 'u10'],
  );
  assert.deepEqual(await ids({ age: { $not: { $lt: 85 } } }), ['u03', 'u06', 'u08', 'u09']);
  assert.deepEqual(await ids({ $not: { manager: { $exists: true } } }), ['u04', 'u08', 'u09', 'u10']);
});

test('$all, $elemMatch, $allMatch, $keyMapMatch', async () => {
  assert.deepEqual(await ids({ tags: { $all: ['math'] } }), ['u01', 'u02']);
  assert.deepEqual(await ids({ tags: { $all: ['math', 'crypto'] } }), ['u02']);
  assert.deepEqual(await ids({ tags: { $elemMatch: { $eq: 'algorithms' } } }), ['u04', 'u06']);
  assert.deepEqual(await ids({ tags: { $allMatch: { $in: ['math', 'poetry'] } } }), ['u01']);
  assert.deepEqual(await ids({ prefs: { $keyMapMatch: { $eq: 'theme' } } }), ['u10']);
});

test('sort needs an index; with one, results come in its order either way', async () => {
  await assert.rejects(db.find({ selector: { age: { $gt: 0 } }, sort: ['age'] }), (error) => {
    assert.equal(error.status, 400);
    assert.equal(error.error, 'no_usable_index');
    return true;
  });
  await db.createIndex({ index: { fields: ['age'] }, ddoc: 'by-age', name: 'age' });
  const ascending = await ids({ age: { $gt: 50 } }, { sort: ['age'] });
  assert.deepEqual(ascending, ['u07', 'u04', 'u10', 'u05', 'u03', 'u06', 'u08', 'u09']);
  const descending = await ids({ age: { $gt: 50 } }, { sort: [{ age: 'desc' }] });
  assert.deepEqual(descending, [...ascending].reverse());
  // The sort field makes the index usable for an empty selector (documents without it are not
  // in the index, as in CouchDB).
  assert.equal((await ids({}, { sort: ['age'] })).length, 10);
  const byId = await ids({ _id: { $gt: 'u05' } }, { sort: [{ _id: 'desc' }] });
  assert.deepEqual(byId, ['u10', 'u09', 'u08', 'u07', 'u06']);
});

test('fields, limit and skip', async () => {
  const { docs } = await db.find({
    selector: { city: 'London' }, fields: ['_id', 'name.first', 'missing'],
  });
  assert.deepEqual(docs, [{ _id: 'u01', name: { first: 'Ada' } }, { _id: 'u02', name: { first: 'Alan' } }]);
  const page = await ids({ age: { $gt: 0 } }, { sort: ['age'], limit: 3, skip: 2 });
  assert.deepEqual(page, ['u07', 'u04', 'u10']);
  // The default limit is 25.
  await db.bulkDocs(Array.from({ length: 30 }, (_, i) => ({ _id: `bulk${String(i).padStart(2, '0')}`, bulk: true })));
  assert.equal((await db.find({ selector: { bulk: true } })).docs.length, 25);
});

test('bookmarks page through every result once', async () => {
  const seen = [];
  let bookmark;
  for (let pages = 0; pages < 20; pages += 1) {
    const response = await db.find({ selector: { bulk: true }, limit: 7, bookmark });
    seen.push(...response.docs.map((doc) => doc._id));
    if (response.docs.length < 7) break;
    bookmark = response.bookmark;
  }
  assert.equal(seen.length, 30);
  assert.equal(new Set(seen).size, 30);
  // Through an index, with a sort.
  const sorted = [];
  bookmark = undefined;
  for (let pages = 0; pages < 20; pages += 1) {
    const response = await db.find({ selector: { age: { $gt: 0 } }, sort: ['age'], limit: 3, bookmark });
    sorted.push(...response.docs.map((doc) => doc._id));
    if (response.docs.length < 3) break;
    bookmark = response.bookmark;
  }
  assert.deepEqual(sorted, await ids({ age: { $gt: 0 } }, { sort: ['age'] }));
  // No result: CouchDB's "nil" bookmark.
  const none = await db.find({ selector: { city: 'Mars' } });
  assert.equal(none.bookmark, 'nil');
});

test('use_index picks an index, or warns that it could not', async () => {
  await db.createIndex({ index: { fields: ['city'] }, ddoc: 'by-city', name: 'city' });
  const used = await db.find({ selector: { city: 'Boston', age: { $gt: 0 } }, use_index: ['by-city', 'city'] });
  assert.deepEqual(used.docs.map((doc) => doc._id), ['u05', 'u08']);
  assert.equal(used.warning, undefined);
  const missing = await db.find({ selector: { city: 'Boston' }, use_index: 'nothing-here' });
  assert.deepEqual(missing.docs.map((doc) => doc._id), ['u05', 'u08']);
  assert.match(missing.warning, /_design\/nothing-here was not used because it does not contain a valid index for this query/);
  const strict = await http('POST', `${server.url}/people/_find`, {
    body: { selector: { city: 'Boston' }, use_index: 'nothing-here', allow_fallback: false },
  });
  assert.equal(strict.status, 400);
  assert.equal(strict.json.error, 'invalid_index');
  // A query no JSON index serves warns that it scanned all documents.
  const scan = await db.find({ selector: { manager: true } });
  assert.match(scan.warning, /No matching index found, create an index to optimize query time/);
});

test('conflicts: true adds _conflicts', async () => {
  await http('POST', `${server.url}/people/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 'c1', _rev: '1-aaa', v: 1 }, { _id: 'c1', _rev: '1-bbb', v: 1 }] },
  });
  const { docs } = await db.find({ selector: { _id: 'c1' }, conflicts: true });
  assert.equal(docs.length, 1);
  assert.deepEqual(docs[0]._conflicts, ['1-aaa']);
  const plain = await db.find({ selector: { _id: 'c1' } });
  assert.equal(plain.docs[0]._conflicts, undefined);
});

test('bad requests get CouchDB errors', async () => {
  const cases = [
    [{ selector: { age: { $bad: 1 } } }, 'invalid_operator'],
    [{ selector: { age: { $in: 3 } } }, 'bad_arg'],
    [{ selector: 'x' }, 'invalid_selector_json'],
    [{}, 'missing_required_key'],
    [{ selector: {}, limit: -1 }, 'invalid_non_neg_integer'],
    [{ selector: {}, sort: { age: 'asc' } }, 'invalid_sort_json'],
    [{ selector: {}, sort: ['a', { b: 'desc' }] }, 'unsupported_mixed_sort'],
    [{ selector: {}, fields: 'a' }, 'invalid_fields'],
    [{ selector: {}, bookmark: 'not-a-bookmark' }, 'invalid_bookmark'],
    [{ selector: {}, whatever: 1 }, 'invalid_key'],
    [{ selector: { $where: 'x' } }, 'not_supported'],
  ];
  for (const [body, error] of cases) {
    const response = await http('POST', `${server.url}/people/_find`, { body });
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.json.error, error, JSON.stringify(body));
  }
  await assert.rejects(db.find({ selector: { age: { $bad: 1 } } }), (error) => error.status === 400);
  assert.equal((await http('GET', `${server.url}/people/_find`)).status, 405);
  const text = await http('POST', `${server.url}/people/_find`, {
    body: '{"selector": {}}', headers: { 'content-type': 'text/plain' },
  });
  assert.equal(text.status, 415);
  const broken = await http('POST', `${server.url}/people/_find`, { body: '{"selector": ' });
  assert.equal(broken.status, 400);
  assert.equal((await http('POST', `${server.url}/nope/_find`, { body: { selector: {} } })).status, 404);
});
