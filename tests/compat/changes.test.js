'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const http_ = require('node:http');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let pouch;
let nano;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('feed');
  pouch = new PouchDB(`${server.url}/feed`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  await pouch.bulkDocs([{ _id: 'a', kind: 'x' }, { _id: 'b', kind: 'y' }, { _id: 'c', kind: 'x' }]);
  await pouch.put({ _id: '_design/d', views: {} });
});
test.after(async () => server.stop());

test('normal feed: every document once, since, limit, include_docs', async () => {
  const all = await pouch.changes({ since: 0 });
  assert.deepEqual(all.results.map((row) => row.id).sort(), ['_design/d', 'a', 'b', 'c']);
  assert.equal(typeof all.last_seq, 'string');
  const none = await pouch.changes({ since: all.last_seq });
  assert.equal(none.results.length, 0);
  const limited = await http('GET', `${server.url}/feed/_changes?limit=2`);
  assert.equal(limited.json.results.length, 2);
  const rest = await http('GET', `${server.url}/feed/_changes?since=${encodeURIComponent(limited.json.last_seq)}`);
  const seen = [...limited.json.results, ...rest.json.results].map((row) => row.id).sort();
  assert.deepEqual(seen, ['_design/d', 'a', 'b', 'c']);
  const withDocs = await pouch.changes({ include_docs: true, since: 0 });
  assert.ok(withDocs.results.every((row) => row.doc && row.doc._id === row.id));
  // A row's seq resumes after that row.
  const second = all.results[1].seq;
  const after = await pouch.changes({ since: second });
  assert.equal(after.results.length, all.results.length - 2);
  const bad = await http('GET', `${server.url}/feed/_changes?since=garbage`);
  assert.equal(bad.status, 400);
});

test('updates replace a document\'s earlier change; deletions show deleted', async () => {
  const start = (await pouch.changes({ since: 0 })).last_seq;
  const a = await pouch.get('a');
  await pouch.put({ ...a, kind: 'z' });
  const b = await pouch.get('b');
  await pouch.remove(b);
  const feed = await pouch.changes({ since: start });
  assert.deepEqual(feed.results.map((row) => row.id).sort(), ['a', 'b']);
  assert.equal(feed.results.find((row) => row.id === 'b').deleted, true);
});

test('filters: _doc_ids, _selector, _design', async () => {
  const ids = await http('POST', `${server.url}/feed/_changes?filter=_doc_ids`, { body: { doc_ids: ['c'] } });
  assert.deepEqual(ids.json.results.map((row) => row.id), ['c']);
  const viaPouch = await pouch.changes({ doc_ids: ['a'] });
  assert.deepEqual(viaPouch.results.map((row) => row.id), ['a']);
  const selector = await http('POST', `${server.url}/feed/_changes?filter=_selector`, { body: { selector: { kind: 'x' } } });
  assert.deepEqual(selector.json.results.map((row) => row.id), ['c']);
  const design = await http('GET', `${server.url}/feed/_changes?filter=_design`);
  assert.deepEqual(design.json.results.map((row) => row.id), ['_design/d']);
});

test('style=all_docs lists every leaf of a conflicted document', async () => {
  await http('POST', `${server.url}/feed/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 'k', _rev: '1-aaa', v: 1 }, { _id: 'k', _rev: '1-bbb', v: 2 }] },
  });
  const feed = await http('GET', `${server.url}/feed/_changes?style=all_docs&filter=_doc_ids&doc_ids=${encodeURIComponent('["k"]')}`);
  assert.deepEqual(feed.json.results[0].changes.map((change) => change.rev).sort(), ['1-aaa', '1-bbb']);
  const main = await http('GET', `${server.url}/feed/_changes?filter=_doc_ids&doc_ids=${encodeURIComponent('["k"]')}`);
  assert.deepEqual(main.json.results[0].changes, [{ rev: '1-bbb' }]);
});

test('longpoll waits for the next change; timeout ends an idle one', async () => {
  const now = (await pouch.changes({ since: 0 })).last_seq;
  const waiting = http('GET', `${server.url}/feed/_changes?feed=longpoll&since=${encodeURIComponent(now)}`);
  await new Promise((resolve) => setTimeout(resolve, 200));
  await pouch.put({ _id: 'late' });
  const answer = await waiting;
  assert.deepEqual(answer.json.results.map((row) => row.id), ['late']);
  const started = Date.now();
  const idle = await http('GET', `${server.url}/feed/_changes?feed=longpoll&since=now&timeout=300`);
  assert.equal(idle.json.results.length, 0);
  assert.ok(Date.now() - started >= 250);
});

test('continuous feed streams lines, heartbeats and picks up new writes', async () => {
  const lines = [];
  const request = http_.get(`${server.url}/feed/_changes?feed=continuous&since=now&heartbeat=100`, {
    headers: { authorization: `Basic ${Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64')}` },
  });
  const gotChange = new Promise((resolve, reject) => {
    request.on('response', (response) => {
      assert.equal(response.statusCode, 200);
      let buffer = '';
      response.on('data', (chunk) => {
        buffer += chunk;
        let index;
        while ((index = buffer.indexOf('\n')) >= 0) {
          lines.push(buffer.slice(0, index));
          buffer = buffer.slice(index + 1);
          const line = lines[lines.length - 1];
          if (line.includes('"id":"streamed"')) resolve(JSON.parse(line));
        }
      });
    });
    request.on('error', reject);
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  await pouch.put({ _id: 'streamed' });
  const change = await gotChange;
  request.destroy();
  assert.equal(change.id, 'streamed');
  assert.ok(lines.some((line) => line === ''), 'heartbeat newlines');
});

test('PouchDB live changes see a new write', async () => {
  const live = pouch.changes({ since: 'now', live: true });
  const seen = new Promise((resolve) => live.on('change', (change) => { if (change.id === 'live') resolve(change); }));
  setTimeout(() => pouch.put({ _id: 'live' }), 100);
  const change = await seen;
  live.cancel();
  assert.equal(change.id, 'live');
});

test('eventsource feed sends data lines with ids', async () => {
  const controller = new AbortController();
  const response = await fetch(`${server.url}/feed/_changes?feed=eventsource&since=0&limit=1`, {
    headers: { authorization: `Basic ${Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64')}` },
    signal: controller.signal,
  });
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const text = await response.text();
  assert.match(text, /^data: \{.*\}\nid: \S+\n\n/);
});
