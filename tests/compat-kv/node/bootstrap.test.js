// Bootstrap: connect, open a bucket, reach its default collection, wait until ready, ping.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, waitUntilReady, couchbase } = require('./harness');

describe('bootstrap', () => {
  let env;
  before(async () => { env = await setUp(); });
  after(async () => { await env?.tearDown(); });

  it('connects, opens a bucket and its default collection, and waits until ready', async () => {
    const cluster = await env.settee.connect();
    try {
      await waitUntilReady(cluster);
      const bucket = cluster.bucket('default');
      await bucket.waitUntilReady(15000, { serviceTypes: [couchbase.ServiceType.KeyValue] });
      assert.equal(bucket.name, 'default');
      const collection = bucket.defaultCollection();
      assert.equal(collection.name, '_default');
      await collection.upsert('node::bootstrap', { ready: true });
      assert.deepEqual((await collection.get('node::bootstrap')).content, { ready: true });
    } finally {
      await cluster.close();
    }
  });

  it('reports the KV endpoint ok when pinging the bucket', async () => {
    const report = await env.bucket.ping({ serviceTypes: [couchbase.ServiceType.KeyValue] });
    const endpoints = report.services[couchbase.ServiceType.KeyValue];
    assert.ok(endpoints.length >= 1, JSON.stringify(report));
    for (const endpoint of endpoints) assert.equal(endpoint.state, couchbase.PingState.Ok, JSON.stringify(endpoint));
  });

  it('serves every key of a bucket with 8 vbuckets', async () => {
    // 200 keys cover all 8 vbuckets of `small` many times over; a wrong vbucket map would
    // send some of them to a vbucket the server does not own.
    const collection = env.cluster.bucket('small').defaultCollection();
    for (let number = 0; number < 200; number += 1) {
      await collection.upsert(`node::small::${number}`, { n: number });
    }
    for (let number = 0; number < 200; number += 1) {
      assert.deepEqual((await collection.get(`node::small::${number}`)).content, { n: number });
    }
  });
});
