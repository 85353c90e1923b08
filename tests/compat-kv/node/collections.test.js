// Scopes and collections (issue 19): the SDK's collection manager creates a scope and two
// collections; each takes CRUD, CAS, sub-document lookups and mutations and expiry; the same key
// in two collections is two documents; a dropped collection's documents are gone and its name
// comes back empty; unknown scopes and duplicate names get the SDK's own errors.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const {
  setUp, uniqueKey, casString, sleep, couchbase, waitForManifestOnEveryNode,
} = require('./harness');

const {
  CasMismatchError, CollectionExistsError, CollectionNotFoundError, DocumentExistsError,
  DocumentNotFoundError, LookupInSpec, MutateInSpec, ScopeExistsError, ScopeNotFoundError,
} = couchbase;
const WAIT_MS = 3500;

// Whether scopes (a manifest's, as GET .../scopes lists it) has collection in scope.
const lists = (scopes, scope, collection) => scopes.some(
  (spec) => spec.name === scope && (collection === undefined
    || spec.collections.some((entry) => entry.name === collection)),
);

describe('scopes and collections', () => {
  let env;
  let manager;
  let scope;
  before(async () => {
    env = await setUp();
    manager = env.bucket.collections();
    scope = `inv-${crypto.randomBytes(4).toString('hex')}`;
    // In a cluster every node must know a change before the next one or the tests look, as in
    // the SDKs' own test suites (harness.js, waitForManifestOnEveryNode).
    await manager.createScope(scope);
    await waitForManifestOnEveryNode(env.settee, 'default', (scopes) => lists(scopes, scope));
    await manager.createCollection('airline', scope, { maxExpiry: 3600 });
    await manager.createCollection('route', scope);
    await waitForManifestOnEveryNode(env.settee, 'default',
      (scopes) => lists(scopes, scope, 'airline') && lists(scopes, scope, 'route'));
  });
  after(async () => { await env?.tearDown(); });

  it('the manager lists what it created and refuses duplicates and unknown names', async () => {
    const scopes = await manager.getAllScopes();
    const mine = scopes.find((spec) => spec.name === scope);
    assert.ok(scopes.some((spec) => spec.name === '_default'));
    const names = Object.fromEntries(mine.collections.map((spec) => [spec.name, spec]));
    assert.deepEqual(Object.keys(names).sort(), ['airline', 'route']);
    assert.equal(names.airline.maxExpiry, 3600);
    await assert.rejects(manager.createScope(scope), ScopeExistsError);
    await assert.rejects(manager.createCollection('route', scope), CollectionExistsError);
    await assert.rejects(manager.createCollection('c', 'no-such-scope'), ScopeNotFoundError);
    await assert.rejects(manager.dropCollection('no-such-collection', scope), CollectionNotFoundError);
    await assert.rejects(manager.dropScope('no-such-scope'), ScopeNotFoundError);
  });

  it('CRUD, CAS, sub-document and expiry in each collection; one key, separate documents', async () => {
    const key = uniqueKey('collections');
    const collections = ['airline', 'route'].map((name) => env.bucket.scope(scope).collection(name));
    for (const collection of collections) {
      const name = collection.name;
      const created = await collection.insert(key, { in: name, n: 1 });
      await assert.rejects(collection.insert(key, { again: true }), DocumentExistsError);
      const got = await collection.get(key);
      assert.deepEqual(got.content, { in: name, n: 1 });
      assert.equal(casString(got.cas), casString(created.cas));
      const replaced = await collection.replace(key, { in: name, n: 2 }, { cas: got.cas });
      await assert.rejects(collection.replace(key, { stale: true }, { cas: got.cas }), CasMismatchError);
      const looked = await collection.lookupIn(key, [LookupInSpec.get('in'), LookupInSpec.exists('n')]);
      assert.equal(looked.content[0].value, name);
      assert.equal(looked.content[1].value, true);
      const mutated = await collection.mutateIn(key, [
        MutateInSpec.upsert('extra', name), MutateInSpec.increment('n', 5),
      ]);
      assert.notEqual(casString(mutated.cas), casString(replaced.cas));
      assert.deepEqual((await collection.get(key)).content, { in: name, n: 7, extra: name });
      await collection.upsert(`${key}::expiring`, { in: name }, { expiry: 2 });
      await collection.upsert(`${key}::removed`, { in: name });
      await collection.remove(`${key}::removed`);
      await assert.rejects(collection.get(`${key}::removed`), DocumentNotFoundError);
    }
    const defaults = env.bucket.defaultCollection();
    await assert.rejects(defaults.get(key), DocumentNotFoundError);
    await defaults.upsert(key, { in: '_default' });
    for (const collection of collections) {
      assert.equal((await collection.get(key)).content.in, collection.name);
    }
    await sleep(WAIT_MS);
    for (const collection of collections) {
      await assert.rejects(collection.get(`${key}::expiring`), DocumentNotFoundError);
      assert.equal((await collection.get(key)).content.in, collection.name);
    }
  });

  it('a dropped collection\'s documents are gone and its name comes back empty', async () => {
    const key = uniqueKey('dropped');
    const dropScope = `drop-${crypto.randomBytes(4).toString('hex')}`;
    await manager.createScope(dropScope);
    await waitForManifestOnEveryNode(env.settee, 'default', (scopes) => lists(scopes, dropScope));
    await manager.createCollection('temp', dropScope);
    await waitForManifestOnEveryNode(env.settee, 'default', (scopes) => lists(scopes, dropScope, 'temp'));
    const before = env.bucket.scope(dropScope).collection('temp');
    await before.upsert(key, { v: 'before' });
    assert.deepEqual((await before.get(key)).content, { v: 'before' });
    await manager.dropCollection('temp', dropScope);
    await waitForManifestOnEveryNode(env.settee, 'default', (scopes) => !lists(scopes, dropScope, 'temp'));
    await assert.rejects(before.get(key), CollectionNotFoundError);
    await manager.createCollection('temp', dropScope);
    await waitForManifestOnEveryNode(env.settee, 'default', (scopes) => lists(scopes, dropScope, 'temp'));
    const again = env.bucket.scope(dropScope).collection('temp');
    await assert.rejects(again.get(key), DocumentNotFoundError);
    await again.upsert(key, { v: 'after' });
    assert.deepEqual((await again.get(key)).content, { v: 'after' });
  });

  it('an unknown scope is ScopeNotFound', async () => {
    const key = uniqueKey('unknown');
    const unknown = env.bucket.scope('no-such-scope').collection('c');
    await assert.rejects(unknown.get(key), ScopeNotFoundError);
    await assert.rejects(unknown.upsert(key, { v: 1 }), ScopeNotFoundError);
  });
});
