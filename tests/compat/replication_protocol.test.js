'use strict';
// The server half of the replication protocol, checked the way a replicator uses it:
// open_revs answered as multipart/mixed (CouchDB's replicator asks for documents with
// attachments that way), atts_since in _bulk_get, _revs_limit stemming of replicated
// histories and what _revs_diff then reports, _ensure_full_commit, style=all_docs leaves.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
const authorization = `Basic ${Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64')}`;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/proto`);
});
test.after(async () => server.stop());

function boundaryOf(contentType) {
  const match = /boundary="?([^";]+)"?/.exec(contentType);
  assert.ok(match, contentType);
  return match[1];
}

// Splits a multipart body into { headers, body } parts (bodies as latin1 strings).
function parts(text, boundary) {
  const out = [];
  const pieces = text.split(`--${boundary}`);
  for (const piece of pieces.slice(1)) {
    if (piece.startsWith('--')) break;
    const [head, ...rest] = piece.replace(/^\r\n/, '').split('\r\n\r\n');
    const headers = {};
    for (const line of head.split('\r\n')) {
      const at = line.indexOf(':');
      if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
    }
    out.push({ headers, body: rest.join('\r\n\r\n').replace(/\r\n$/, '') });
  }
  return out;
}

async function twoAttachmentRevisions(id) {
  const first = await http('PUT', `${server.url}/proto/${id}`, {
    body: { v: 1, _attachments: { 'old.txt': { content_type: 'text/plain', data: Buffer.from('old body').toString('base64') } } },
  });
  const second = await http('PUT', `${server.url}/proto/${id}`, {
    body: {
      v: 2,
      _rev: first.json.rev,
      _attachments: {
        'old.txt': { stub: true },
        'new.txt': { content_type: 'text/plain', data: Buffer.from('new body').toString('base64') },
      },
    },
  });
  assert.equal(second.status, 201);
  return [first.json.rev, second.json.rev];
}

test('open_revs with attachments as multipart/mixed, atts_since and a missing revision', async () => {
  const [first, second] = await twoAttachmentRevisions('mixed');
  const query = `revs=true&latest=true&attachments=true&open_revs=${encodeURIComponent(JSON.stringify([second, '9-missing']))}&atts_since=${encodeURIComponent(JSON.stringify([first]))}`;
  const response = await fetch(`${server.url}/proto/mixed?${query}`, { headers: { accept: 'multipart/mixed', authorization } });
  assert.equal(response.status, 200);
  const outer = parts(Buffer.from(await response.arrayBuffer()).toString('latin1'), boundaryOf(response.headers.get('content-type')));
  assert.equal(outer.length, 2);
  assert.match(outer[0].headers['content-type'], /^multipart\/related/);
  const inner = parts(outer[0].body, boundaryOf(outer[0].headers['content-type']));
  const doc = JSON.parse(inner[0].body);
  assert.equal(doc._rev, second);
  assert.deepEqual(doc._revisions.ids.length, 2);
  // The attachment the ancestor had is a stub; the new one follows in its own part.
  assert.equal(doc._attachments['old.txt'].stub, true);
  assert.equal(doc._attachments['new.txt'].follows, true);
  assert.equal(inner.length, 2);
  assert.match(inner[1].headers['content-disposition'], /filename="new.txt"/);
  // Sent as stored (text/plain is stored gzipped, as in CouchDB), and the part says so.
  assert.equal(doc._attachments['new.txt'].encoding, 'gzip');
  assert.equal(inner[1].headers['content-encoding'], 'gzip');
  assert.equal(require('node:zlib').gunzipSync(Buffer.from(inner[1].body, 'latin1')).toString(), 'new body');
  assert.match(outer[1].headers['content-type'], /error="true"/);
  assert.deepEqual(JSON.parse(outer[1].body), { missing: '9-missing' });
});

test('_bulk_get honours atts_since per document', async () => {
  const [first, second] = await twoAttachmentRevisions('bulk');
  const answer = await http('POST', `${server.url}/proto/_bulk_get?revs=true&attachments=true`, {
    body: { docs: [{ id: 'bulk', rev: second, atts_since: [first] }, { id: 'bulk', rev: second }] },
  });
  assert.equal(answer.status, 200);
  const [withSince, without] = answer.json.results.map((result) => result.docs[0].ok);
  assert.equal(withSince._attachments['old.txt'].stub, true);
  assert.equal(Buffer.from(withSince._attachments['new.txt'].data, 'base64').toString(), 'new body');
  assert.equal(Buffer.from(without._attachments['old.txt'].data, 'base64').toString(), 'old body');
});

test('_revs_limit stems replicated histories; _revs_diff then reports the stemmed revisions as missing', async () => {
  await http('PUT', `${server.url}/stemmed`);
  assert.equal((await http('PUT', `${server.url}/stemmed/_revs_limit`, { body: '3' })).status, 200);
  const ids = ['f', 'e', 'd', 'c', 'b', 'a'];
  const written = await http('POST', `${server.url}/stemmed/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 's', _rev: '6-f', _revisions: { start: 6, ids }, v: 6 }] },
  });
  assert.equal(written.status, 201);
  const doc = await http('GET', `${server.url}/stemmed/s?revs=true`);
  assert.deepEqual(doc.json._revisions, { start: 6, ids: ['f', 'e', 'd'] });
  const diff = await http('POST', `${server.url}/stemmed/_revs_diff`, { body: { s: ['2-b', '4-d', '7-g'] } });
  assert.deepEqual(diff.json, { s: { missing: ['2-b', '7-g'], possible_ancestors: ['6-f'] } });
  // Replicating the long history again changes nothing.
  await http('POST', `${server.url}/stemmed/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 's', _rev: '6-f', _revisions: { start: 6, ids }, v: 6 }] },
  });
  assert.equal((await http('GET', `${server.url}/stemmed/s?revs=true`)).json._rev, '6-f');
});

test('_ensure_full_commit is POST only and reports the instance start time of the database', async () => {
  assert.equal((await http('GET', `${server.url}/proto/_ensure_full_commit`)).status, 405);
  const ensured = await http('POST', `${server.url}/proto/_ensure_full_commit`, { body: '{}' });
  assert.equal(ensured.status, 201);
  const info = (await http('GET', `${server.url}/proto`)).json;
  assert.equal(ensured.json.instance_start_time, info.instance_start_time);
  assert.equal((await http('POST', `${server.url}/nope/_ensure_full_commit`, { body: '{}' })).status, 404);
});

test('conflicts as CouchDB: deterministic winner, _conflicts, _deleted_conflicts, all leaves in style=all_docs', async () => {
  await http('PUT', `${server.url}/leaves`);
  await http('POST', `${server.url}/leaves/_bulk_docs`, {
    body: {
      new_edits: false,
      docs: [
        { _id: 'x', _rev: '2-b', _revisions: { start: 2, ids: ['b', 'a'] }, side: 'b' },
        { _id: 'x', _rev: '2-c', _revisions: { start: 2, ids: ['c', 'a'] }, side: 'c' },
        { _id: 'x', _rev: '3-d', _revisions: { start: 3, ids: ['d', 'z', 'a'] }, _deleted: true },
      ],
    },
  });
  const doc = await http('GET', `${server.url}/leaves/x?conflicts=true&deleted_conflicts=true`);
  // Live beats deleted, then the higher generation, then the greater hash.
  assert.equal(doc.json._rev, '2-c');
  assert.deepEqual(doc.json._conflicts, ['2-b']);
  assert.deepEqual(doc.json._deleted_conflicts, ['3-d']);
  const changes = await http('GET', `${server.url}/leaves/_changes?style=all_docs`);
  assert.deepEqual(changes.json.results[0].changes.map((change) => change.rev), ['2-c', '2-b', '3-d']);
  // Resolution: delete the losing live leaf; the deleted leaves stay as _deleted_conflicts.
  assert.equal((await http('DELETE', `${server.url}/leaves/x?rev=2-b`)).status, 200);
  const resolved = await http('GET', `${server.url}/leaves/x?conflicts=true&deleted_conflicts=true`);
  assert.equal(resolved.json._rev, '2-c');
  assert.equal(resolved.json._conflicts, undefined);
  assert.equal(resolved.json._deleted_conflicts.length, 2);
});

test('attachments stored gzipped replicate as stored: multipart, same digest and revpos, not recompressed', async () => {
  const url = server.url;
  const config = `${url}/_node/_local/_config/attachments/compression_level`;
  for (const db of ['gz_src', 'gz_tgt']) assert.equal((await http('PUT', `${url}/${db}`)).status, 201);
  const text = 'This is a compressible line of text.\n'.repeat(4000);
  const created = await http('PUT', `${url}/gz_src/doc`, { body: { v: 1 } });
  const first = await http('PUT', `${url}/gz_src/doc/readme.txt?rev=${created.json.rev}`, {
    body: text, headers: { 'content-type': 'text/plain' },
  });
  const binary = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7919) % 256));
  const second = await http('PUT', `${url}/gz_src/doc/data.bin?rev=${first.json.rev}`, {
    body: binary, headers: { 'content-type': 'application/octet-stream' },
  });
  assert.equal(second.status, 201);
  await http('PUT', `${url}/gz_src/plain`, { body: { no: 'attachments' } });
  const source = (await http('GET', `${url}/gz_src/doc?att_encoding_info=true`)).json;
  assert.equal(source._attachments['readme.txt'].encoding, 'gzip');

  // The target would not compress what it is given: only carrying the stored bytes keeps them gzipped.
  const before = await http('PUT', config, { body: JSON.stringify('0') });
  try {
    const result = await http('POST', `${url}/_replicate`, { body: { source: 'gz_src', target: 'gz_tgt' } });
    assert.equal(result.status, 200, result.text);
    assert.equal(result.json.history[0].docs_written, 2);
    assert.equal(result.json.history[0].doc_write_failures, 0);
  } finally {
    await http('PUT', config, { body: JSON.stringify(before.json) });
  }
  const copy = (await http('GET', `${url}/gz_tgt/doc?att_encoding_info=true`)).json;
  assert.equal(copy._rev, source._rev);
  const [gz, bin] = [copy._attachments['readme.txt'], copy._attachments['data.bin']];
  assert.equal(gz.encoding, 'gzip');
  assert.ok(gz.encoded_length < gz.length, JSON.stringify(gz));
  assert.equal(gz.digest, source._attachments['readme.txt'].digest);
  assert.equal(gz.revpos, 2);
  assert.equal(bin.revpos, 3);
  assert.equal(bin.encoding, undefined);
  assert.equal((await http('GET', `${url}/gz_tgt/doc/readme.txt`)).text, text);
  const copied = await fetch(`${url}/gz_tgt/doc/data.bin`, { headers: { authorization } });
  assert.deepEqual(Buffer.from(await copied.arrayBuffer()), binary);
  assert.equal((await http('GET', `${url}/gz_tgt/plain`)).json.no, 'attachments');
});
