'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/bad`);
});
test.after(async () => server.stop());

test('malformed JSON is 400 bad_request', async () => {
  const response = await http('PUT', `${server.url}/bad/doc`, { body: '{"a": ' });
  assert.equal(response.status, 400);
  assert.equal(response.json.error, 'bad_request');
  const bulk = await http('POST', `${server.url}/bad/_bulk_docs`, { body: '{"docs": [}' });
  assert.equal(bulk.status, 400);
});

test('a non-object document is refused', async () => {
  const response = await http('PUT', `${server.url}/bad/doc`, { body: '[1,2,3]' });
  assert.equal(response.status, 400);
  assert.deepEqual(response.json, { error: 'bad_request', reason: 'Document must be a JSON object' });
});

test('unknown special members and underscore ids are refused', async () => {
  const special = await http('PUT', `${server.url}/bad/doc`, { body: { _foo: 1 } });
  assert.equal(special.status, 400);
  assert.equal(special.json.error, 'doc_validation');
  const underscore = await http('PUT', `${server.url}/bad/_nope`, { body: {} });
  assert.equal(underscore.status, 400);
});

test('an oversized document is 413 document_too_large and nothing is stored', async () => {
  const big = { blob: 'x'.repeat(1_100_000) };
  const response = await http('PUT', `${server.url}/bad/big`, { body: big });
  assert.equal(response.status, 413);
  assert.equal(response.json.error, 'document_too_large');
  assert.equal((await http('GET', `${server.url}/bad/big`)).status, 404);
});

test('too-deep JSON and over-long ids are 400', async () => {
  const deep = '{"a":'.repeat(200) + '1' + '}'.repeat(200);
  assert.equal((await http('PUT', `${server.url}/bad/deep`, { body: deep })).status, 400);
  const longId = 'x'.repeat(300);
  assert.equal((await http('PUT', `${server.url}/bad/${longId}`, { body: {} })).status, 400);
});

test('numbers no double can hold are 400 and nothing is stored', async () => {
  // Found by the couch_doc fuzz target: such a body used to be stored, then failed readers.
  const response = await http('PUT', `${server.url}/bad/huge`, { body: '{"n": 1e999}' });
  assert.equal(response.status, 400);
  assert.equal(response.json.error, 'bad_request');
  const bulk = await http('POST', `${server.url}/bad/_bulk_docs`, { body: '{"docs": [{"_id": "huge2", "n": -2E+400}]}' });
  assert.equal(bulk.status, 400);
  assert.equal((await http('GET', `${server.url}/bad/huge`)).status, 404);
  assert.equal((await http('GET', `${server.url}/bad/huge2`)).status, 404);
  const fine = await http('PUT', `${server.url}/bad/big-number`, { body: '{"n": 1e308}' });
  assert.equal(fine.status, 201);
  // serde_json's reserved raw-value member name (also found by fuzzing) is refused cleanly.
  const reserved = await http('PUT', `${server.url}/bad/reserved`, { body: '{"$serde_json::private::RawValue": {" ": 0}}' });
  assert.equal(reserved.status, 400);
  assert.equal((await http('GET', `${server.url}/bad/reserved`)).status, 404);
});

test('wrong revisions are conflicts or bad requests, and lose nothing', async () => {
  const saved = await http('PUT', `${server.url}/bad/keep`, { body: { v: 1 } });
  assert.equal((await http('PUT', `${server.url}/bad/keep`, { body: { _rev: 'garbage', v: 2 } })).status, 400);
  assert.equal((await http('PUT', `${server.url}/bad/keep`, { body: { _rev: '1-0000', v: 2 } })).status, 409);
  const kept = await http('GET', `${server.url}/bad/keep`);
  assert.equal(kept.json._rev, saved.json.rev);
  assert.equal(kept.json.v, 1);
});

test('the server keeps serving after all of that', async () => {
  assert.equal((await http('GET', `${server.url}/_up`)).status, 200);
  assert.equal((await http('PUT', `${server.url}/bad/after`, { body: { fine: true } })).status, 201);
});

test('a path that does not decode to UTF-8 is refused, not stored with replacement characters', async () => {
  // fetch sends the escapes as written: the server sees the bytes FF FE.
  const put = await http('PUT', `${server.url}/bad/%FF%FE`, { body: { a: 1 } });
  assert.equal(put.status, 400);
  assert.deepEqual(put.json, { error: 'illegal_docid', reason: 'Document id must be valid UTF-8' });
  const design = await http('PUT', `${server.url}/bad/_design/%C3`, { body: {} });
  assert.equal(design.status, 400);
  assert.equal(design.json.error, 'illegal_docid');
  const doc = await http('PUT', `${server.url}/bad/has-attachment`, { body: {} });
  assert.equal(doc.status, 201);
  const attachment = await http('PUT', `${server.url}/bad/has-attachment/%FF.txt?rev=${doc.json.rev}`, {
    body: 'text', headers: { 'content-type': 'text/plain' },
  });
  assert.equal(attachment.status, 400);
  assert.deepEqual(attachment.json, { error: 'bad_request', reason: 'Attachment name is not UTF-8 encoded' });
  const db = await http('PUT', `${server.url}/%FF`);
  assert.equal(db.status, 400);
  assert.equal(db.json.error, 'illegal_database_name');
  // Nothing was stored under U+FFFD.
  const all = await http('GET', `${server.url}/bad/_all_docs`);
  assert.ok(!all.text.includes('\ufffd'), all.text);
  assert.equal((await http('GET', `${server.url}/bad/${encodeURIComponent('\ufffd\ufffd')}`)).status, 404);
  const attachments = await http('GET', `${server.url}/bad/has-attachment`);
  assert.equal(attachments.json._attachments, undefined);
  // Valid UTF-8 escapes still work.
  const cafe = await http('PUT', `${server.url}/bad/caf%C3%A9`, { body: {} });
  assert.equal(cafe.status, 201);
  assert.equal(cafe.json.id, 'caf\u00e9');
});
