'use strict';
// settee's sub-document endpoints for HTTP clients: the same engine calls as the KV door's
// lookup_in / mutate_in (POST /{db}/{id}/_lookup and _mutate).
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/sub`);
  await http('PUT', `${server.url}/sub/doc`, { body: { name: 'settee', list: [1, 2], n: { x: 5 } } });
});
test.after(async () => server.stop());

test('_lookup answers every spec in order', async () => {
  const response = await http('POST', `${server.url}/sub/doc/_lookup`, {
    body: { specs: [
      { op: 'get', path: 'name' }, { op: 'exists', path: 'list' }, { op: 'count', path: 'list' },
      { op: 'get', path: 'n.x' }, { op: 'get', path: 'missing' }, { op: 'get', path: 'name.x' },
      { op: 'get', path: '$document.deleted', xattr: true },
    ] },
  });
  assert.equal(response.status, 200);
  assert.deepEqual(response.json.results, [
    { status: 'success', value: 'settee' }, { status: 'success', value: true },
    { status: 'success', value: 2 }, { status: 'success', value: 5 },
    { status: 'path_not_found' }, { status: 'path_mismatch' },
    { status: 'success', value: false },
  ]);
  assert.match(response.json.cas, /^[0-9]+$/);
  const missing = await http('POST', `${server.url}/sub/nope/_lookup`, { body: { specs: [{ op: 'get', path: 'a' }] } });
  assert.equal(missing.status, 404);
  const bad = await http('POST', `${server.url}/sub/doc/_lookup`, { body: { specs: [{ op: 'frobnicate', path: 'a' }] } });
  assert.equal(bad.status, 400);
});

test('_mutate applies all specs as one new revision, or none', async () => {
  const before = (await http('GET', `${server.url}/sub/doc`)).json;
  const response = await http('POST', `${server.url}/sub/doc/_mutate`, {
    body: { specs: [
      { op: 'upsert', path: 'name', value: 'couch' },
      { op: 'array_append', path: 'list', values: [3, 4] },
      { op: 'counter', path: 'n.x', value: 10 },
      { op: 'insert', path: 'deep.er', value: true, create_path: true },
    ] },
  });
  assert.equal(response.status, 201);
  assert.deepEqual(response.json.results, [{ index: 2, value: 15 }]);
  const after = (await http('GET', `${server.url}/sub/doc`)).json;
  assert.equal(after._rev, response.json.rev);
  assert.equal(Number(after._rev.split('-')[0]), Number(before._rev.split('-')[0]) + 1);
  assert.deepEqual({ ...after, _id: undefined, _rev: undefined },
    { _id: undefined, _rev: undefined, name: 'couch', list: [1, 2, 3, 4], n: { x: 15 }, deep: { er: true } });

  const failed = await http('POST', `${server.url}/sub/doc/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'name', value: 'lost' }, { op: 'insert', path: 'name', value: 1 }] },
  });
  assert.equal(failed.status, 400);
  assert.deepEqual({ error: failed.json.error, spec: failed.json.spec }, { error: 'path_exists', spec: 1 });
  assert.equal((await http('GET', `${server.url}/sub/doc`)).json.name, 'couch');

  const stale = await http('POST', `${server.url}/sub/doc/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'a', value: 1 }], cas: '1' },
  });
  assert.equal(stale.status, 409);
  const created = await http('POST', `${server.url}/sub/fresh/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'a', value: 1 }], store: 'insert' },
  });
  assert.equal(created.status, 201);
  assert.deepEqual((await http('GET', `${server.url}/sub/fresh`)).json.a, 1);
  const again = await http('POST', `${server.url}/sub/fresh/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'a', value: 2 }], store: 'insert' },
  });
  assert.equal(again.status, 409);
  const absent = await http('POST', `${server.url}/sub/absent/_mutate`, {
    body: { specs: [{ op: 'upsert', path: 'a', value: 2 }] },
  });
  assert.equal(absent.status, 404);
});
