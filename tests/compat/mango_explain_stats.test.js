// _explain and execution_stats over plain HTTP: which index a query uses, the ranges it scans,
// and how many keys and documents it examined. settee uses an index for $in and for an $or
// whose every branch constrains the index's leading field, so such queries examine about as
// many documents as they return (CouchDB scans the whole index for them).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

const DOCS = 200;
let server;
let url;

async function find(body) {
  const response = await http('POST', `${url}/_find`, { body: { execution_stats: true, limit: 1000, ...body } });
  assert.equal(response.status, 200, response.text);
  return response.json;
}

async function explain(body) {
  const response = await http('POST', `${url}/_explain`, { body });
  assert.equal(response.status, 200, response.text);
  return response.json;
}

test.before(async () => {
  server = await start();
  url = `${server.url}/stats`;
  await http('PUT', url);
  const docs = Array.from({ length: DOCS }, (_, n) => ({
    _id: `d${String(n).padStart(3, '0')}`, group: n % 10, n, kind: n % 2 ? 'odd' : 'even',
  }));
  await http('POST', `${url}/_bulk_docs`, { body: { docs } });
  await http('POST', `${url}/_index`, { body: { index: { fields: ['group'] }, ddoc: 'g', name: 'group' } });
  await http('POST', `${url}/_index`, { body: { index: { fields: ['kind', 'n'] }, ddoc: 'k', name: 'kind-n' } });
});
test.after(async () => server.stop());

test('$in on an indexed field uses the index and examines what it returns', async () => {
  const selector = { group: { $in: [3, 1] } };
  const plan = await explain({ selector });
  assert.equal(plan.index.name, 'group');
  assert.equal(plan.index.ddoc, '_design/g');
  assert.deepEqual(plan.plan.ranges.slice(0, 2), [
    { start_key: [1], end_key: [1, '<MAX>'] },
    { start_key: [3], end_key: [3, '<MAX>'] },
  ]);
  assert.deepEqual(plan.mrargs.start_key, [1]);
  const result = await find({ selector });
  assert.equal(result.docs.length, 40);
  assert.ok(result.docs.every((doc) => doc.group === 1 || doc.group === 3));
  const stats = result.execution_stats;
  assert.equal(stats.results_returned, 40);
  assert.equal(stats.total_docs_examined, 40);
  assert.equal(stats.total_keys_examined, 40);
  assert.equal(stats.total_quorum_docs_examined, 0);
  assert.equal(typeof stats.execution_time_ms, 'number');
  assert.equal(result.warning, undefined);
  // In index order: all of group 1, then all of group 3.
  assert.deepEqual(result.docs.slice(0, 20).map((doc) => doc.group), Array(20).fill(1));
});

test('$or over the leading field uses one range per branch', async () => {
  const selector = { $or: [{ group: 2 }, { group: { $gte: 8 } }] };
  const plan = await explain({ selector });
  assert.equal(plan.index.name, 'group');
  assert.deepEqual(plan.plan.ranges, [
    { start_key: [2], end_key: [2, '<MAX>'] },
    { start_key: [8], end_key: ['<MAX>'] },
  ]);
  const result = await find({ selector });
  assert.equal(result.docs.length, 60);
  assert.equal(result.execution_stats.total_docs_examined, 60);
  // A compound index: $or branches on its leading field, each narrowing the second.
  const compound = { $or: [{ kind: 'odd', n: { $lt: 10 } }, { kind: 'even', n: { $gt: 189 } }] };
  const compoundPlan = await explain({ selector: compound });
  assert.equal(compoundPlan.index.name, 'kind-n');
  const found = await find({ selector: compound });
  assert.deepEqual(found.docs.map((doc) => doc.n), [190, 192, 194, 196, 198, 1, 3, 5, 7, 9]);
  assert.ok(found.execution_stats.total_docs_examined <= 12, JSON.stringify(found.execution_stats));
});

test('without a usable index: _all_docs, every document examined, and warnings', async () => {
  const selector = { $or: [{ n: 2 }, { n: 7 }] };
  const plan = await explain({ selector });
  assert.equal(plan.index.name, '_all_docs');
  assert.equal(plan.index.type, 'special');
  assert.deepEqual(plan.mrargs.start_key, null);
  assert.deepEqual(plan.mrargs.end_key, '<MAX>');
  const result = await find({ selector });
  assert.equal(result.docs.length, 2);
  assert.equal(result.execution_stats.total_docs_examined, DOCS);
  assert.match(result.warning, /No matching index found/);
  assert.match(result.warning, /number of documents examined is high/);
});

test('r > 1 reads documents one by one: quorum reads', async () => {
  const result = await find({ selector: { group: 4 }, r: 2 });
  assert.equal(result.execution_stats.results_returned, 20);
  assert.equal(result.execution_stats.total_docs_examined, 0);
  assert.equal(result.execution_stats.total_quorum_docs_examined, 20);
  const plan = await explain({ selector: { group: 4 }, r: 2 });
  assert.equal(plan.mrargs.include_docs, false);
});

test('_explain shows what CouchDB shows', async () => {
  const plan = await explain({ selector: { group: 1, n: { $gt: 100 } }, fields: ['n'], sort: ['group'], limit: 5, skip: 1 });
  for (const member of ['dbname', 'index', 'partitioned', 'selector', 'opts', 'limit', 'skip', 'fields',
    'index_candidates', 'selector_hints', 'mrargs', 'covering']) {
    assert.ok(member in plan, member);
  }
  assert.equal(plan.dbname, 'stats');
  assert.deepEqual(plan.selector, { $and: [{ group: { $eq: 1 } }, { n: { $gt: 100 } }] });
  assert.equal(plan.limit, 5);
  assert.equal(plan.skip, 1);
  assert.deepEqual(plan.fields, ['n']);
  assert.deepEqual(plan.opts.sort, { group: 'asc' });
  assert.equal(plan.mrargs.direction, 'fwd');
  assert.deepEqual(plan.selector_hints, [{ type: 'json', indexable_fields: ['group', 'n'], unindexable_fields: [] }]);
  const others = plan.index_candidates.map((candidate) => [candidate.index.name, candidate.analysis.reasons[0].name]);
  assert.deepEqual(others.sort(), [['_all_docs', 'field_mismatch'], ['kind-n', 'field_mismatch']]);
  // A covering index: only indexed fields and _id are read.
  const covering = await explain({ selector: { group: 1 }, fields: ['_id', 'group'] });
  assert.equal(covering.covering, true);
  // A sort nothing can serve: _explain answers with no index, _find refuses.
  const none = await explain({ selector: { n: { $gt: 1 } }, sort: ['n'] });
  assert.equal(none.index, null);
  const refused = await http('POST', `${url}/_find`, { body: { selector: { n: { $gt: 1 } }, sort: ['n'] } });
  assert.equal(refused.status, 400);
  assert.equal(refused.json.error, 'no_usable_index');
  assert.equal(refused.json.reason, 'No index exists for this sort, try indexing by the sort fields.');
  assert.equal((await http('GET', `${url}/_explain`)).status, 405);
});

test('the response body is CouchDB\'s, byte for byte around the documents', async () => {
  const body = { selector: { group: 1 }, fields: ['_id'], limit: 2 };
  const response = await http('POST', `${url}/_find`, { body });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'application/json');
  assert.equal(
    response.text,
    `{"docs":[\r\n{"_id":"d001"},\r\n{"_id":"d011"}\r\n],\r\n"bookmark": "${response.json.bookmark}"}\r\n`,
  );
  const empty = await http('POST', `${url}/_find`, { body: { selector: { group: 11 }, execution_stats: true } });
  assert.match(empty.text, /^\{"docs":\[\r\n\],\r\n"bookmark": "nil",\r\n"execution_stats": \{.*\}\}\r\n$/);
});

test('the index reflects every write acknowledged before the query (update=true)', async () => {
  for (let i = 0; i < 25; i += 1) {
    const id = `late${i}`;
    const put = await http('PUT', `${url}/${id}`, { body: { group: 100 + i, n: -i } });
    assert.equal(put.status, 201);
    const found = await find({ selector: { group: { $in: [100 + i] } } });
    assert.deepEqual(found.docs.map((doc) => doc._id), [id]);
    assert.equal(found.execution_stats.total_docs_examined, 1);
  }
  // An update moves the document in the index; a deletion takes it out.
  const doc = (await http('GET', `${url}/late0`)).json;
  await http('PUT', `${url}/late0`, { body: { ...doc, group: 200 } });
  assert.deepEqual((await find({ selector: { group: 100 } })).docs, []);
  assert.deepEqual((await find({ selector: { group: 200 } })).docs.map((d) => d._id), ['late0']);
  const moved = (await http('GET', `${url}/late0`)).json;
  await http('DELETE', `${url}/late0?rev=${moved._rev}`);
  assert.deepEqual((await find({ selector: { group: 200 } })).docs, []);
});
