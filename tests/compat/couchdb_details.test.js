// Details CouchDB 3.5 applications and CouchDB's own suite check, each against what CouchDB 3.5
// answers (issue 22): built-in reducers, error reasons, status codes, query parameters.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
let nano;
let base;

test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  base = server.url;
});
test.after(async () => server.stop());

async function freshDb(name) {
  await nano.db.create(name);
  return nano.use(name);
}

test('_top_N, _bottom_N, _first and _last reducers (CouchDB 3.5)', async () => {
  const db = await freshDb('details_rank');
  const docs = [];
  for (let i = 1; i <= 20; i += 1) docs.push({ _id: `d${i}`, integer: i });
  await db.bulk({ docs });
  const map = 'function (doc) { emit(doc.integer, doc.integer); emit(doc.integer, doc.integer); };';
  await db.insert({
    _id: '_design/rank',
    views: {
      top: { map, reduce: '_top_3' },
      bottom: { map, reduce: '_bottom_3' },
      first: { map, reduce: '_first' },
      last: { map, reduce: '_last' },
    },
  });
  const value = async (view, params = {}) => (await db.view('rank', view, params)).rows[0].value;
  assert.deepEqual(await value('top'), [20, 19, 18]);
  assert.deepEqual(await value('bottom'), [1, 2, 3]);
  assert.equal(await value('first'), 1);
  assert.equal(await value('last'), 20);
  // Equal values count once; descending queries rank the same.
  assert.deepEqual(await value('top', { startkey: 4, endkey: 5 }), [5, 4]);
  assert.deepEqual(await value('bottom', { startkey: 6, endkey: 4, descending: true }), [4, 5, 6]);
  assert.equal(await value('last', { startkey: 6, endkey: 4, descending: true }), 6);
  const grouped = await db.view('rank', 'first', { group: true, limit: 3 });
  assert.deepEqual(grouped.rows.map((row) => row.value), [1, 2, 3]);

  const refused = async (reduce) => {
    const resp = await http('PUT', `${base}/details_rank/_design/bad`, {
      body: { views: { v: { map: 'function (doc) {}', reduce } } },
    });
    assert.equal(resp.status, 400);
    assert.equal(resp.json.error, 'invalid_design_doc');
    return resp.json.reason;
  };
  assert.equal(await refused('_top_Foo'), 'invalid rank reducer');
  assert.equal(await refused('_bottom_0'), 'rank value must be between 1 and 100');
  assert.equal(await refused('_top_101'), 'rank value must be between 1 and 100');
  assert.equal(await refused('_median'), '`_median` is not a supported reduce function.');
});

test('a rev in the body that differs from If-Match is a 400 naming the etag', async () => {
  const db = await freshDb('details_revs');
  const created = await db.insert({ _id: 'doc', n: 1 });
  let resp = await http('PUT', `${base}/details_revs/doc`, {
    body: { _rev: created.rev, n: 2 },
    headers: { 'if-match': '1-foobar' },
  });
  assert.equal(resp.status, 400);
  assert.equal(resp.json.reason, 'Document rev and etag have different values');
  resp = await http('PUT', `${base}/details_revs/doc?rev=1-foobar`, { body: { _rev: created.rev, n: 2 } });
  assert.equal(resp.status, 400);
  assert.equal(resp.json.reason, 'Document rev from request body and query string have different values');
  resp = await http('PUT', `${base}/details_revs/doc`, {
    body: { n: 2 },
    headers: { 'if-match': created.rev },
  });
  assert.equal(resp.status, 201);
});

test('a 304 says Content-Length: 0, as CouchDB sends it', async () => {
  const db = await freshDb('details_etag');
  await db.insert({ _id: 'doc', n: 1 });
  const first = await http('GET', `${base}/details_etag/doc`);
  const etag = first.headers.get('etag');
  const again = await http('GET', `${base}/details_etag/doc`, { headers: { 'if-none-match': etag } });
  assert.equal(again.status, 304);
  assert.equal(again.headers.get('content-length'), '0');
  assert.equal(again.text, '');
});

test('attachment edits: an unknown rev is 409 missing_rev, a stub with another revpos 412', async () => {
  const db = await freshDb('details_atts');
  const created = await db.insert({
    _id: 'doc',
    _attachments: { 'foo.txt': { content_type: 'text/plain', data: Buffer.from('hello').toString('base64') } },
  });
  let resp = await http('DELETE', `${base}/details_atts/doc/foo.txt?rev=4-garbage`);
  assert.equal(resp.status, 409);
  assert.deepEqual(resp.json, { error: 'not_found', reason: 'missing_rev' });
  // A stub without revpos keeps the attachment; one naming another revpos is refused.
  const kept = await db.insert({ _id: 'doc', _rev: created.rev, _attachments: { 'foo.txt': { stub: true } } });
  resp = await http('PUT', `${base}/details_atts/doc`, {
    body: { _rev: kept.rev, _attachments: { 'foo.txt': { stub: true, revpos: 10 } } },
  });
  assert.equal(resp.status, 412);
  assert.equal(resp.json.error, 'missing_stub');
  resp = await http('PUT', `${base}/details_atts/doc`, {
    body: { _rev: kept.rev, _attachments: { 'foo.txt': { stub: true, revpos: 1 } } },
  });
  assert.equal(resp.status, 201);
});

test('view and listing parameter errors as CouchDB names them', async () => {
  const db = await freshDb('details_params');
  await db.insert({ _id: 'a', integer: 1 });
  await db.insert({
    _id: '_design/t',
    views: {
      plain: { map: 'function (doc) { emit(doc._id, null); }' },
      big: {
        map: 'function (doc) { emit(doc.integer, doc.integer); }',
        reduce: 'function (keys, values) { var out = []; for (var i = 0; i < 1000; i++) { out.push("wazzap"); } return out; }',
      },
    },
  });
  let resp = await http('POST', `${base}/details_params/_design/t/_view/plain`, { body: { keys: 1 } });
  assert.equal(resp.status, 400);
  assert.deepEqual(resp.json, { error: 'bad_request', reason: '`keys` member must be an array.' });
  resp = await http('GET', `${base}/details_params/_design/t/_view/plain?keys=1`);
  assert.deepEqual(resp.json, { error: 'query_parse_error', reason: '`keys` must be an array of strings.' });
  resp = await http('GET', `${base}/details_params/_all_docs?keys=1`);
  assert.deepEqual(resp.json, { error: 'bad_request', reason: '`keys` parameter must be an array.' });
  for (const path of ['_all_docs', '_changes']) {
    resp = await http('POST', `${base}/details_params/${path}`, {
      body: '{}',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(resp.status, 415, path);
    assert.deepEqual(resp.json, { error: 'bad_content_type', reason: 'Content-Type must be application/json' });
  }
  // A reduce whose output grows is an error row in a 200, as CouchDB streams it.
  resp = await http('GET', `${base}/details_params/_design/t/_view/big`);
  assert.equal(resp.status, 200);
  assert.equal(resp.json.rows[0].error, 'reduce_overflow_error');
  assert.match(resp.json.rows[0].reason, /^Reduce output must shrink more rapidly: input size: \d+ output size: \d+$/);
});

test('[chttpd] max_http_request_size set through _config bounds the next request', async () => {
  const db = await freshDb('details_size');
  await db.insert({ _id: 'doc1' });
  const config = `${base}/_node/_local/_config/chttpd/max_http_request_size`;
  const before = await http('GET', config);
  assert.equal(before.status, 200);
  assert.equal((await http('PUT', config, { body: JSON.stringify('16') })).status, 200);
  try {
    const resp = await http('POST', `${base}/details_size/_changes`, { body: { doc_ids: ['doc1', 'doc3', 'doc4'] } });
    assert.equal(resp.status, 413);
    assert.deepEqual(resp.json, { error: 'too_large', reason: 'the request entity is too large' });
  } finally {
    await http('PUT', config, { body: JSON.stringify(before.json) });
  }
  const resp = await http('POST', `${base}/details_size/_changes?filter=_doc_ids`, { body: { doc_ids: ['doc1'] } });
  assert.equal(resp.status, 200);
  assert.equal(resp.json.results.length, 1);
});

test('views: keys with docid bounds, query string over body, stale reads right after a write', async () => {
  const db = await freshDb('details_views');
  const docs = [];
  for (let i = 0; i < 30; i += 1) docs.push({ _id: String(i), integer: i });
  await db.bulk({ docs });
  await db.insert({
    _id: '_design/t',
    views: { multi: { map: 'function (doc) { for (var i = 0; i < 3; i++) { emit(i, doc.integer); } }' } },
  });
  let resp = await http('POST', `${base}/details_views/_design/t/_view/multi?startkey_docid=21&endkey_docid=23`, {
    body: { keys: [0, 2] },
  });
  assert.deepEqual(resp.json.rows.map((row) => [row.key, row.value]), [[0, 21], [0, 22], [0, 23], [2, 21], [2, 22], [2, 23]]);
  resp = await http('POST', `${base}/details_views/_design/t/_view/multi?limit=1`, { body: { keys: [0, 1], limit: 2 } });
  assert.equal(resp.json.rows.length, 1);

  resp = await http('GET', `${base}/details_views/_design/t/_view/multi?limit=1&update_seq=true`);
  const built = Number.parseInt(resp.json.update_seq, 10);
  await db.insert({ _id: 'A', integer: 1 });
  resp = await http('GET', `${base}/details_views/_design/t/_view/multi?limit=1&update_seq=true&stale=ok`);
  assert.equal(Number.parseInt(resp.json.update_seq, 10), built);
  resp = await http('GET', `${base}/details_views/_design/t/_view/multi?key=0&update=false`);
  assert.equal(resp.json.rows.length, 30);
  // update_after answers from the index as it is, then brings it up to date.
  resp = await http('GET', `${base}/details_views/_design/t/_view/multi?key=0&stale=update_after`);
  assert.equal(resp.json.rows.length, 30);
  for (let tries = 0; ; tries += 1) {
    resp = await http('GET', `${base}/details_views/_design/t/_view/multi?key=0&stale=ok`);
    if (resp.json.rows.length === 31) break;
    assert.ok(tries < 200, 'update_after never brought the index up to date');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  resp = await http('GET', `${base}/details_views/_design/t/_view/multi?key=0`);
  assert.equal(resp.json.rows.length, 31, resp.text);
});

test('a view with options.collation "raw" orders keys as Erlang terms', async () => {
  const db = await freshDb('details_raw');
  const values = [1, 2, false, null, true, { a: 1 }, { b: 1 }, ['a'], ['b', 'c'], 'A', 'B', 'a', 'aa', 'b'];
  await db.bulk({ docs: values.map((foo, i) => ({ _id: String(i + 1).padStart(2, '0'), foo })) });
  await db.insert({
    _id: '_design/test',
    views: {
      raw: { map: 'function (doc) { emit(doc.foo, null); }', options: { collation: 'raw' } },
      icu: { map: 'function (doc) { emit(doc.foo, null); }' },
    },
  });
  let rows = (await db.view('test', 'raw')).rows;
  assert.deepEqual(rows.map((row) => row.key), values);
  rows = (await db.view('test', 'raw', { descending: true })).rows;
  assert.deepEqual(rows.map((row) => row.key), [...values].reverse());
  // "Z" < "a" byte by byte: a valid range in raw order, reversed in view collation.
  rows = (await db.view('test', 'raw', { startkey: 'Z', endkey: 'a' })).rows;
  assert.deepEqual(rows.map((row) => row.key), ['a']);
  rows = (await db.view('test', 'raw', { startkey: 'a', endkey: 'b', inclusive_end: false })).rows;
  assert.deepEqual(rows.map((row) => row.key), ['a', 'aa']);
  const resp = await http('GET', `${base}/details_raw/_design/test/_view/icu?startkey=%22Z%22&endkey=%22a%22`);
  assert.equal(resp.status, 400);
  rows = (await db.view('test', 'icu')).rows;
  assert.deepEqual(rows.map((row) => row.key).slice(0, 3), [null, false, true]);
});

test('map functions see _conflicts, _deleted_conflicts, _attachments stubs and _local_seq', async () => {
  const db = await freshDb('details_mapmeta');
  const text = Buffer.from('This is a base64 encoded text').toString('base64');
  await db.insert({ _id: 'att', _attachments: { 'a.txt': { content_type: 'text/plain', data: text } } });
  await db.insert({ _id: 'plain', n: 1 });
  // Two conflicting branches written as a replicator writes them.
  await db.bulk({ docs: [{ _id: 'conf', _rev: '1-aaa', v: 1 }, { _id: 'conf', _rev: '1-bbb', v: 2 }] }, { new_edits: false });
  await db.insert({
    _id: '_design/meta',
    options: { local_seq: true },
    views: {
      meta: {
        map: `function (doc) {
          emit(doc._id, {
            conflicts: doc._conflicts || null,
            atts: doc._attachments ? Object.keys(doc._attachments).map(function (n) {
              var a = doc._attachments[n]; return [n, a.stub, a.length, a.content_type, a.revpos];
            }) : null,
            seq: typeof doc._local_seq,
          });
        }`,
      },
    },
  });
  const rows = Object.fromEntries((await db.view('meta', 'meta')).rows.map((row) => [row.id, row.value]));
  assert.deepEqual(rows.att.atts, [['a.txt', true, 29, 'text/plain', 1]]);
  assert.equal(rows.att.conflicts, null);
  assert.deepEqual(rows.conf.conflicts, ['1-aaa']);
  assert.equal(rows.plain.atts, null);
  assert.equal(rows.plain.seq, 'number');
  // attachments=true inlines the included documents' attachments.
  const withData = await db.view('meta', 'meta', { key: 'att', include_docs: true, attachments: true });
  assert.equal(withData.rows[0].doc._attachments['a.txt'].data, text);
  const stubs = await db.view('meta', 'meta', { key: 'att', include_docs: true });
  assert.equal(stubs.rows[0].doc._attachments['a.txt'].stub, true);
});

test('compressible attachments are stored gzipped as CouchDB stores them', async () => {
  const db = await freshDb('details_gzip');
  const body = 'hello world hello world hello world';
  let resp = await http('PUT', `${base}/details_gzip/d/hello.txt`, { body, headers: { 'content-type': 'text/plain' } });
  assert.equal(resp.status, 201);
  // The same revision id and digest CouchDB 3.5.0 gives this edit (it hashes the gzipped body).
  assert.equal(resp.json.rev, '1-04e0c92a13e36441fc7a1da1b25e8069');
  let doc = await db.get('d', { att_encoding_info: true });
  assert.deepEqual(doc._attachments['hello.txt'], {
    content_type: 'text/plain', revpos: 1, digest: 'md5-CzDfAHx884e72GgEVUS6Ug==', length: 35, stub: true,
    encoding: 'gzip', encoded_length: 35,
  });
  doc = await db.get('d');
  assert.equal(doc._attachments['hello.txt'].encoding, undefined);
  assert.equal(doc._attachments['hello.txt'].length, 35);
  // Readers that do not accept gzip get the body as sent; those that do get it as stored.
  resp = await http('GET', `${base}/details_gzip/d/hello.txt`, { headers: { 'accept-encoding': 'identity', range: 'bytes=0-4' } });
  assert.equal(resp.status, 200);
  assert.equal(resp.text, body);
  assert.equal(resp.headers.get('accept-ranges'), 'none');
  const inline = await db.get('d', { attachments: true });
  assert.equal(Buffer.from(inline._attachments['hello.txt'].data, 'base64').toString(), body);
  // Not compressible: stored as sent.
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
  await db.attachment.insert('img', 'a.png', png, 'image/png');
  doc = await db.get('img', { att_encoding_info: true });
  assert.equal(doc._attachments['a.png'].encoding, undefined);
  assert.deepEqual(await db.attachment.get('img', 'a.png'), png);
  // A multipart part sent gzipped (as CouchDB's replicator sends one) is stored as it came.
  const zlib = require('node:zlib');
  const gz = zlib.gzipSync(Buffer.from('abcabcabcabc'));
  const json = JSON.stringify({ _attachments: { 'x.txt': { follows: true, content_type: 'text/plain', length: 12, encoding: 'gzip', encoded_length: gz.length } } });
  const multipart = Buffer.concat([
    Buffer.from(`--b\r\ncontent-type: application/json\r\n\r\n${json}\r\n--b\r\n\r\n`), gz, Buffer.from('\r\n--b--'),
  ]);
  resp = await http('PUT', `${base}/details_gzip/mp`, { body: multipart, headers: { 'content-type': 'multipart/related; boundary="b"' } });
  assert.equal(resp.status, 201, resp.text);
  doc = await db.get('mp', { att_encoding_info: true });
  assert.equal(doc._attachments['x.txt'].encoding, 'gzip');
  assert.equal(doc._attachments['x.txt'].length, 12);
  assert.equal((await db.attachment.get('mp', 'x.txt')).toString(), 'abcabcabcabc');
});

test('_info gives the index position as a number; a doc_ids replication of nothing has no_changes', async () => {
  const db = await freshDb('details_info');
  await db.bulk({ docs: [{ _id: 'a' }, { _id: 'b' }] });
  await db.insert({ _id: '_design/d', views: { v: { map: 'function (doc) { emit(doc._id); }' } } });
  await db.view('d', 'v');
  let info = (await http('GET', `${base}/details_info/_design/d/_info`)).json.view_index;
  assert.equal(info.update_seq, 3);
  assert.deepEqual(info.updates_pending, { minimum: 0, preferred: 0, total: 0 });
  await db.insert({ _id: 'c' });
  info = (await http('GET', `${base}/details_info/_design/d/_info`)).json.view_index;
  assert.equal(info.update_seq + info.updates_pending.total, 4);

  await nano.db.create('details_info_target');
  const source = `${server.adminUrl}/details_info`;
  const target = `${server.adminUrl}/details_info_target`;
  let result = await nano.db.replicate(source, target, { doc_ids: ['missing'] });
  assert.deepEqual(result, { ok: true, no_changes: true });
  result = await nano.db.replicate(source, target, { doc_ids: ['a'] });
  assert.equal(result.ok, true);
  assert.equal(result.docs_written, 1);
});

test('_changes: feed=live is continuous; an EventSource Last-Event-ID wins over since', async () => {
  const db = await freshDb('details_feeds');
  for (let i = 0; i < 4; i += 1) await db.insert({ _id: `d${i}` });
  const all = (await http('GET', `${base}/details_feeds/_changes`)).json.results;
  let resp = await http('GET', `${base}/details_feeds/_changes?feed=live&timeout=100`);
  assert.equal(resp.status, 200);
  const lines = resp.text.trim().split('\n').map((line) => JSON.parse(line));
  assert.equal(lines.length, 5);
  assert.ok(lines[4].last_seq);
  resp = await http('GET', `${base}/details_feeds/_changes?feed=eventsource&timeout=100&since=0`, {
    headers: { accept: 'text/event-stream', 'last-event-id': all[1].seq },
  });
  const ids = resp.text.split('\n').filter((line) => line.startsWith('data: ')).map((line) => JSON.parse(line.slice(6)).id);
  assert.deepEqual(ids, all.slice(2).map((row) => row.id));
});

test('multipart answers: atts_since, open_revs for a replicator, Accept wildcards, replicated revpos', async () => {
  const db = await freshDb('details_multipart');
  const first = await db.insert({ _id: 'm', _attachments: { 'a.bin': { content_type: 'application/octet-stream', data: Buffer.from('aaa').toString('base64') } } });
  const doc = await db.get('m');
  const second = await db.insert({ ...doc, _attachments: { ...doc._attachments, 'b.bin': { content_type: 'application/octet-stream', data: Buffer.from('bbb').toString('base64') } } });
  const since = encodeURIComponent(JSON.stringify([first.rev]));
  // atts_since alone: multipart, with only the newer attachment following.
  let resp = await http('GET', `${base}/details_multipart/m?atts_since=${since}`, { headers: { accept: 'multipart/related,*/*;' } });
  assert.match(resp.headers.get('content-type'), /^multipart\/related; boundary="[0-9a-f]{32}"$/);
  assert.match(resp.text, /"a.bin":\{[^}]*"stub":true/);
  assert.match(resp.text, /"b.bin":\{[^}]*"follows":true/);
  // open_revs as a replicator asks for it: every newer attachment follows, attachments=true or not.
  resp = await http('GET', `${base}/details_multipart/m?open_revs=${encodeURIComponent(JSON.stringify([second.rev]))}`, { headers: { accept: 'multipart/mixed' } });
  assert.match(resp.headers.get('content-type'), /^multipart\/mixed/);
  assert.match(resp.text, /Content-Type: multipart\/related; boundary=/);
  // Accept */* takes multipart (CouchDB's accepts_content_type); application/json does not.
  resp = await http('GET', `${base}/details_multipart/m?attachments=true`, { headers: { accept: '*/*' } });
  assert.match(resp.headers.get('content-type'), /^multipart\/related/);
  resp = await http('GET', `${base}/details_multipart/m?attachments=true`, { headers: { accept: 'application/json' } });
  assert.equal(resp.json._attachments['b.bin'].data, Buffer.from('bbb').toString('base64'));
  // A replicated write keeps the attachment's revpos (new_edits=false with inline data).
  resp = await http('POST', `${base}/details_multipart/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 'r', _rev: '3-abc', _revisions: { start: 3, ids: ['abc', 'def', 'ghi'] }, _attachments: { 'x.txt': { content_type: 'application/octet-stream', revpos: 2, data: Buffer.from('x').toString('base64') } } }] },
  });
  assert.equal(resp.status, 201);
  assert.equal((await db.get('r'))._attachments['x.txt'].revpos, 2);
});

test('_all_docs offset counts the live documents before startkey, either way round', async () => {
  const db = await freshDb('details_offset');
  const docs = [];
  for (let i = 0; i < 6; i += 1) docs.push({ _id: String(i) });
  const written = await db.bulk({ docs });
  // A deleted document is not counted.
  await db.destroy('1', written[1].rev);
  await db.insert({ _id: '_design/a' });
  assert.equal((await db.list({ startkey: '3' })).offset, 2);
  assert.equal((await db.list({ startkey: '3', skip: 1 })).offset, 3);
  assert.equal((await db.list({ startkey: '3', descending: true })).offset, 3);
  assert.equal((await db.list({})).offset, 0);
  const design = await http('GET', `${base}/details_offset/_design_docs?startkey="_design/b"`);
  assert.equal(design.json.offset, 1);
  // With keys there is no place to count from: null, as CouchDB answers (key with keys is accepted).
  const keyed = await http('POST', `${base}/details_offset/_all_docs?key="2"`, { body: { keys: ['2', '9'], skip: 1 } });
  assert.equal(keyed.status, 200);
  assert.equal(keyed.json.offset, null);
  assert.deepEqual(keyed.json.rows, [{ key: '9', error: 'not_found' }]);
});

test('sizes: active is less than file before and after compaction, for documents and views', async () => {
  const db = await freshDb('details_sizes');
  const docs = [];
  for (let i = 0; i < 200; i += 1) docs.push({ _id: `d${i}`, n: i, text: 'x'.repeat(100) });
  let written = await db.bulk({ docs });
  const info = await db.info();
  assert.ok(info.sizes.active > 0 && info.sizes.active < info.sizes.file, JSON.stringify(info.sizes));

  await db.insert({ _id: '_design/v', views: { n: { map: 'function (doc) { emit(doc.n, doc.text); }' } } });
  for (let round = 0; round < 3; round += 1) {
    await db.view('v', 'n', { limit: 1 });
    written = await db.bulk({ docs: docs.map((doc, i) => ({ ...doc, n: doc.n + round, _rev: written[i].rev })) });
  }
  await db.view('v', 'n', { limit: 1 });
  const before = (await http('GET', `${base}/details_sizes/_design/v/_info`)).json.view_index;
  assert.ok(before.sizes.active < before.sizes.file, JSON.stringify(before.sizes));
  const compact = await http('POST', `${base}/details_sizes/_compact/v`, { body: {} });
  assert.equal(compact.status, 202);
  let after;
  for (let tries = 0; tries < 100; tries += 1) {
    after = (await http('GET', `${base}/details_sizes/_design/v/_info`)).json.view_index;
    if (!after.compact_running && after.sizes.file < before.sizes.file) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(after.sizes.file < before.sizes.file, `${JSON.stringify(after.sizes)} ${JSON.stringify(before.sizes)}`);
  assert.ok(after.sizes.active < after.sizes.file, JSON.stringify(after.sizes));
  assert.equal((await db.view('v', 'n', {})).rows.length, 200);

  await db.compact();
  let compacted;
  for (let tries = 0; tries < 100; tries += 1) {
    compacted = await db.info();
    if (!compacted.compact_running) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(compacted.sizes.active < compacted.sizes.file, JSON.stringify(compacted.sizes));
});

test('update_seq and last_seq are CouchDB\'s packed shard sequences, accepted back as since', async () => {
  const zlib = require('node:zlib');
  const db = await freshDb('details_seq');
  await db.bulk({ docs: [1, 2, 3, 4, 5].map((i) => ({ _id: `s${i}` })) });
  // {sum}-base64url(term_to_binary([{Node, [Begin, End], {Seq, Uuid, Epoch}}], [compressed]))
  const shards = (seq) => {
    // base64url has '-' too: the sum ends at the first one.
    const at = seq.indexOf('-');
    const [sum, payload] = [seq.slice(0, at), seq.slice(at + 1)];
    const packed = Buffer.from(payload, 'base64url');
    assert.deepEqual([packed[0], packed[1]], [131, 80]);
    const term = zlib.inflateSync(packed.subarray(6));
    assert.equal(term.length, packed.readUInt32BE(2));
    assert.equal(term[0], 108, 'a list');
    return { sum: Number(sum), count: term.readUInt32BE(1), term };
  };
  const info = await db.info();
  const packed = shards(info.update_seq);
  assert.equal(packed.sum, 5);
  assert.ok(packed.count >= 1 && packed.count <= 5, `${packed.count}`);
  assert.equal((await db.changes({ since: info.update_seq })).results.length, 0);
  const first = await db.changes({ limit: 2 });
  assert.equal(shards(first.last_seq).sum, 2);
  assert.equal((await db.changes({ since: first.last_seq })).results.length, 3);
  const bad = await http('GET', `${base}/details_seq/_changes?since=5-g1AAAA`);
  assert.equal(bad.status, 400);

  const copied = await http('POST', `${base}/_replicate`, {
    body: { source: 'details_seq', target: 'details_seq_copy', create_target: true },
  });
  assert.equal(copied.status, 200, copied.text);
  const target = shards((await nano.db.get('details_seq_copy')).update_seq);
  assert.equal(target.sum, 5);
  assert.equal(target.count, packed.count);
});
