'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let nano;
let pouch;
const md5 = (data) => `md5-${crypto.createHash('md5').update(data).digest('base64')}`;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('atts');
  pouch = new PouchDB(`${server.url}/atts`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
});
test.after(async () => server.stop());

test('inline base64 attachments become stubs with digest, length and revpos', async () => {
  const data = Buffer.from('hello world');
  const saved = await pouch.put({ _id: 'inline', _attachments: { 'a.txt': { content_type: 'text/plain', data: data.toString('base64') } } });
  const doc = await pouch.get('inline');
  // text/plain is compressible: stored gzipped as CouchDB's zlib writes it (level 8), and the
  // digest is of the stored bytes, as in CouchDB; length is the body's own.
  const stored = require('node:zlib').gzipSync(data, { level: 8 });
  assert.deepEqual(doc._attachments['a.txt'], { content_type: 'text/plain', revpos: 1, digest: md5(stored), length: 11, stub: true });
  const withData = await http('GET', `${server.url}/atts/inline?attachments=true`, { headers: { accept: 'application/json' } });
  assert.equal(withData.json._attachments['a.txt'].data, data.toString('base64'));
  // An edit that keeps the stub keeps the attachment.
  const edited = await pouch.put({ ...doc, more: true });
  const blob = await pouch.getAttachment('inline', 'a.txt');
  assert.equal(Buffer.from(blob).toString(), 'hello world');
  // atts_since a revision that already had it: stub again.
  const since = await http('GET', `${server.url}/atts/inline?attachments=true&atts_since=${encodeURIComponent(JSON.stringify([saved.rev]))}`, { headers: { accept: 'application/json' } });
  assert.equal(since.json._attachments['a.txt'].stub, true);
  // An edit without _attachments drops them, as in CouchDB.
  const latest = await pouch.get('inline');
  await pouch.put({ _id: 'inline', _rev: latest._rev, plain: true });
  assert.equal((await pouch.get('inline'))._attachments, undefined);
  assert.match(edited.rev, /^2-/);
});

test('standalone PUT, GET (headers) and DELETE of an attachment', async () => {
  const created = await http('PUT', `${server.url}/atts/standalone/dir%2Fpic.bin`, {
    body: Buffer.from([0, 1, 2, 255]), headers: { 'content-type': 'application/x-thing' },
  });
  assert.equal(created.status, 201);
  const got = await http('GET', `${server.url}/atts/standalone/dir%2Fpic.bin`);
  assert.equal(got.status, 200);
  assert.equal(got.headers.get('content-type'), 'application/x-thing');
  assert.equal(got.headers.get('content-md5'), md5(Buffer.from([0, 1, 2, 255])).slice(4));
  const doc = await nano.use('atts').get('standalone');
  assert.equal(doc._attachments['dir/pic.bin'].length, 4);
  const noRev = await http('PUT', `${server.url}/atts/standalone/second.txt`, { body: 'x', headers: { 'content-type': 'text/plain' } });
  assert.equal(noRev.status, 409);
  const second = await http('PUT', `${server.url}/atts/standalone/second.txt?rev=${created.json.rev}`, { body: 'x', headers: { 'content-type': 'text/plain' } });
  assert.equal(second.status, 201);
  assert.deepEqual(Object.keys((await nano.use('atts').get('standalone'))._attachments).sort(), ['dir/pic.bin', 'second.txt']);
  const removed = await http('DELETE', `${server.url}/atts/standalone/dir%2Fpic.bin?rev=${second.json.rev}`);
  assert.equal(removed.status, 200);
  const missing = await http('GET', `${server.url}/atts/standalone/dir%2Fpic.bin`);
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.json, { error: 'not_found', reason: 'Document is missing attachment' });
  // PouchDB's putAttachment / getAttachment.
  const put = await pouch.putAttachment('viapouch', 'p.txt', Buffer.from('pouch data'), 'text/plain');
  assert.equal(put.ok, true);
  const fetched = await pouch.getAttachment('viapouch', 'p.txt');
  assert.equal(Buffer.from(fetched).toString(), 'pouch data');
});

test('multipart/related: GET with attachments=true and PUT', async () => {
  await pouch.put({ _id: 'multi', title: 'm', _attachments: { 'x.txt': { content_type: 'text/plain', data: Buffer.from('xyz').toString('base64') } } });
  const response = await fetch(`${server.url}/atts/multi?attachments=true`, {
    headers: { accept: 'multipart/related', authorization: `Basic ${Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64')}` },
  });
  const type = response.headers.get('content-type');
  assert.match(type, /^multipart\/related; boundary="[^"]+"$/);
  const boundary = type.match(/boundary="([^"]+)"/)[1];
  const text = Buffer.from(await response.arrayBuffer()).toString('latin1');
  const parts = text.split(`--${boundary}`).slice(1, -1);
  assert.equal(parts.length, 2);
  const json = JSON.parse(parts[0].split('\r\n\r\n')[1]);
  assert.equal(json._attachments['x.txt'].follows, true);
  // Sent as stored, as CouchDB sends it: gzipped (text/plain), and the part says so.
  assert.equal(json._attachments['x.txt'].encoding, 'gzip');
  const [partHeaders, partBody] = parts[1].split('\r\n\r\n');
  assert.match(partHeaders, /Content-Encoding: gzip/);
  const gunzipped = require('node:zlib').gunzipSync(Buffer.from(partBody.replace(/\r\n$/, ''), 'latin1'));
  assert.equal(gunzipped.toString(), 'xyz');
  // Upload a document and an attachment in one multipart PUT.
  const doc = JSON.stringify({ title: 'uploaded', _attachments: { 'up.txt': { content_type: 'text/plain', follows: true, length: 5 } } });
  const body = `--B\r\nContent-Type: application/json\r\n\r\n${doc}\r\n--B\r\n\r\nhello\r\n--B--`;
  const put = await http('PUT', `${server.url}/atts/uploaded`, { body, headers: { 'content-type': 'multipart/related; boundary="B"' } });
  assert.equal(put.status, 201);
  const stored = await http('GET', `${server.url}/atts/uploaded/up.txt`);
  assert.equal(stored.text, 'hello');
  const truncated = await http('PUT', `${server.url}/atts/broken`, { body: `--B\r\nContent-Type: application/json\r\n\r\n${doc}\r\n--B\r\n\r\nhel`, headers: { 'content-type': 'multipart/related; boundary="B"' } });
  assert.equal(truncated.status, 400);
});

test('open_revs as JSON and as multipart/mixed', async () => {
  const first = await pouch.put({ _id: 'revs', v: 1 });
  await pouch.put({ _id: 'revs', _rev: first.rev, v: 2 });
  const all = await pouch.get('revs', { open_revs: 'all' });
  assert.equal(all.length, 1);
  assert.equal(all[0].ok.v, 2);
  const some = await http('GET', `${server.url}/atts/revs?open_revs=${encodeURIComponent(JSON.stringify([first.rev, '9-nope']))}&latest=true`, { headers: { accept: 'application/json' } });
  assert.equal(some.json[0].ok.v, 2);
  assert.deepEqual(some.json[1], { missing: '9-nope' });
  const mixed = await fetch(`${server.url}/atts/revs?open_revs=all`, {
    headers: { accept: 'multipart/mixed', authorization: `Basic ${Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64')}` },
  });
  assert.match(mixed.headers.get('content-type'), /^multipart\/mixed; boundary=/);
  assert.match(await mixed.text(), /"v":2/);
});
