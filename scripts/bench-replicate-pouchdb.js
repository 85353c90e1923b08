'use strict';
// PouchDB (node, leveldb adapter) <-> settee: push DOCS documents (1% with a 1 KiB
// attachment) from a fresh PouchDB to settee, then pull them into a second fresh PouchDB, and
// check that the pulled database equals the pushed one (ids, revisions, conflicts).
// Usage: node bench-replicate-pouchdb.js http://host:port DOCS WORKDIR
const path = require('node:path');
const fs = require('node:fs');
const PouchDB = require('pouchdb');

async function main() {
  const [url, docsText, work] = process.argv.slice(2);
  const docs = Number(docsText || 100000);
  fs.mkdirSync(work, { recursive: true });
  const auth = { username: 'admin', password: 'secret' };
  const remote = new PouchDB(`${url}/pouch-bench`, { auth });
  await remote.destroy().catch(() => {});
  const remoteFresh = new PouchDB(`${url}/pouch-bench`, { auth });
  const source = new PouchDB(path.join(work, 'source'));
  const attachment = Buffer.alloc(1024, 'a').toString('base64');
  for (let start = 0; start < docs; start += 1000) {
    const batch = [];
    for (let n = start; n < Math.min(start + 1000, docs); n += 1) {
      const doc = { _id: `doc${String(n).padStart(8, '0')}`, n, text: 'replicate me' };
      if (n % 100 === 0) doc._attachments = { 'a.bin': { content_type: 'application/octet-stream', data: attachment } };
      batch.push(doc);
    }
    await source.bulkDocs(batch);
  }
  let started = Date.now();
  const pushed = await PouchDB.replicate(source, remoteFresh, { batch_size: 500 });
  const pushSeconds = (Date.now() - started) / 1000;
  const target = new PouchDB(path.join(work, 'target'));
  started = Date.now();
  const pulled = await PouchDB.replicate(remoteFresh, target, { batch_size: 500 });
  const pullSeconds = (Date.now() - started) / 1000;
  const all = async (db) => (await db.allDocs({ conflicts: true, include_docs: true })).rows
    .map((row) => `${row.id} ${row.value.rev} ${JSON.stringify(row.doc._conflicts || [])}`);
  const [a, b, c] = [await all(source), await all(remoteFresh), await all(target)];
  const equal = a.length === docs && JSON.stringify(a) === JSON.stringify(b) && JSON.stringify(b) === JSON.stringify(c);
  console.log(JSON.stringify({
    documents: docs,
    push_seconds: pushSeconds, push_docs_per_second: Math.round(docs / pushSeconds), push_written: pushed.docs_written,
    pull_seconds: pullSeconds, pull_docs_per_second: Math.round(docs / pullSeconds), pull_written: pulled.docs_written,
    equal,
  }));
  await source.destroy();
  await target.destroy();
  if (!equal) process.exit(1);
}

main().catch((error) => { console.error(error); process.exit(1); });
