'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
let nano;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
});
test.after(async () => server.stop());

test('welcome, _up and _uuids answer like CouchDB', async () => {
  const welcome = await http('GET', `${server.url}/`, { user: null });
  assert.equal(welcome.status, 200);
  assert.equal(welcome.json.couchdb, 'Welcome');
  assert.match(welcome.json.version, /^3\./);
  assert.equal((await http('GET', `${server.url}/_up`, { user: null })).json.status, 'ok');
  const uuids = await http('GET', `${server.url}/_uuids?count=3`);
  assert.equal(uuids.json.uuids.length, 3);
  for (const id of uuids.json.uuids) assert.match(id, /^[0-9a-f]{32}$/);
  // sequential (the default): a shared prefix and increasing ids
  assert.equal(uuids.json.uuids[0].slice(0, 26), uuids.json.uuids[2].slice(0, 26));
  assert.ok(uuids.json.uuids[0] < uuids.json.uuids[1]);
  const tooMany = await http('GET', `${server.url}/_uuids?count=1001`);
  assert.equal(tooMany.status, 400);
});

test('database create, info, list and delete', async () => {
  await nano.db.create('alpha');
  const info = await nano.db.get('alpha');
  assert.equal(info.db_name, 'alpha');
  assert.equal(info.doc_count, 0);
  assert.equal(info.doc_del_count, 0);
  assert.equal(typeof info.update_seq, 'string');
  assert.ok(info.sizes && typeof info.sizes.active === 'number');
  const duplicate = await http('PUT', `${server.url}/alpha`);
  assert.equal(duplicate.status, 412);
  assert.equal(duplicate.json.error, 'file_exists');
  const dbs = await nano.db.list();
  assert.ok(dbs.includes('alpha'));
  assert.ok(dbs.includes('_users'));
  const infos = await http('POST', `${server.url}/_dbs_info`, { body: { keys: ['alpha', 'nope'] } });
  assert.equal(infos.json[0].info.db_name, 'alpha');
  assert.equal(infos.json[1].error, 'not_found');
  await nano.db.destroy('alpha');
  const gone = await http('GET', `${server.url}/alpha`);
  assert.equal(gone.status, 404);
  assert.deepEqual(gone.json, { error: 'not_found', reason: 'Database does not exist.' });
});

test('q sets the vbucket count, illegal names are refused', async () => {
  const created = await http('PUT', `${server.url}/sharded?q=16`);
  assert.equal(created.status, 201);
  assert.match(created.headers.get('location'), /\/sharded$/);
  assert.equal((await nano.db.get('sharded')).cluster.q, 16);
  const illegal = await http('PUT', `${server.url}/Bad-Name`);
  assert.equal(illegal.status, 400);
  assert.equal(illegal.json.error, 'illegal_database_name');
  assert.equal((await http('PUT', `${server.url}/toomany?q=5000`)).status, 400);
});

test('doc_count and doc_del_count follow writes', async () => {
  await nano.db.create('counts');
  const db = nano.use('counts');
  const a = await db.insert({ v: 1 }, 'a');
  await db.insert({ v: 2 }, 'b');
  await db.destroy('a', a.rev);
  const info = await nano.db.get('counts');
  assert.equal(info.doc_count, 1);
  assert.equal(info.doc_del_count, 1);
});
