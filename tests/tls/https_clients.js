// nano and PouchDB (the http adapter) over HTTPS against settee, trusting the test CA through
// NODE_EXTRA_CA_CERTS (run.sh sets it, or leaves it out to check that an untrusting client is
// refused). Usage: node https_clients.js https://127.0.0.1:PORT trusted|untrusted
const assert = require('node:assert/strict');
const nano = require('nano');
const PouchDB = require('pouchdb');

const [url, mode] = process.argv.slice(2);

async function trusted() {
  const couch = nano({ url, requestDefaults: { auth: { username: 'admin', password: 'secret' } } });
  await couch.db.create('nano_tls');
  const db = couch.db.use('nano_tls');
  const saved = await db.insert({ over: 'https' }, 'doc1');
  assert.equal(saved.ok, true);
  assert.equal((await db.get('doc1')).over, 'https');

  const pouch = new PouchDB(`${url}/pouch_tls`, { auth: { username: 'admin', password: 'secret' } });
  const put = await pouch.put({ _id: 'p1', from: 'pouchdb' });
  assert.equal(put.ok, true);
  assert.equal((await pouch.get('p1')).from, 'pouchdb');
  const info = await pouch.info();
  assert.equal(info.doc_count, 1);
  console.log('ok: nano and PouchDB wrote and read over HTTPS');
}

async function untrusted() {
  const couch = nano({ url, requestDefaults: { auth: { username: 'admin', password: 'secret' } } });
  await assert.rejects(couch.db.list(), (error) => {
    assert.match(String(error.code || error.message), /UNABLE_TO_GET_ISSUER_CERT_LOCALLY|certificate/i);
    return true;
  });
  const pouch = new PouchDB(`${url}/pouch_tls`, { auth: { username: 'admin', password: 'secret' } });
  await assert.rejects(pouch.info());
  console.log('ok: nano and PouchDB refuse a certificate they do not trust');
}

(mode === 'trusted' ? trusted() : untrusted()).catch((error) => {
  console.error(error);
  process.exit(1);
});
