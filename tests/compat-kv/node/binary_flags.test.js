// Non-JSON values and flags round-trip byte for byte.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

const { RawBinaryTranscoder, RawJsonTranscoder, RawStringTranscoder } = couchbase;
const EVERY_BYTE = Buffer.from(Array.from({ length: 256 }, (_, n) => n));

// Writes bytes with chosen flags and reads back the bytes together with the stored flags.
class FlagsTranscoder {
  constructor(flags) { this.flags = flags; }
  encode(value) { return [value, this.flags]; }
  decode(bytes, flags) { return { bytes: Buffer.from(bytes), flags }; }
}

describe('binary values and flags', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('round-trips a binary value', async () => {
    const key = uniqueKey('binary');
    const transcoder = new RawBinaryTranscoder();
    const mutation = await collection.upsert(key, EVERY_BYTE, { transcoder });
    const result = await collection.get(key, { transcoder });
    assert.deepEqual(result.content, EVERY_BYTE);
    assert.equal(casString(result.cas), casString(mutation.cas));
  });

  it('keeps the binary flags, so the JSON transcoder does not parse the document as JSON', async () => {
    const key = uniqueKey('binary-flags');
    await collection.upsert(key, Buffer.from('{"looks":"like json"}'), { transcoder: new RawBinaryTranscoder() });
    // The default transcoder hands binary-flagged documents back as a Buffer, never parsed.
    const result = await collection.get(key);
    assert.ok(Buffer.isBuffer(result.content), `got ${typeof result.content}`);
    assert.equal(result.content.toString(), '{"looks":"like json"}');
  });

  it('round-trips a string value', async () => {
    const key = uniqueKey('string');
    const text = 'plain text, not JSON: héllo ✓ \u0000 end';
    const transcoder = new RawStringTranscoder();
    await collection.upsert(key, text, { transcoder });
    assert.equal((await collection.get(key, { transcoder })).content, text);
    // And the default transcoder sees a string too (string flags, not JSON).
    assert.equal((await collection.get(key)).content, text);
  });

  it('stores raw JSON as sent and reads it as JSON', async () => {
    const key = uniqueKey('raw-json');
    const raw = '{"b": 2, "a": [1, 2, {"c": null}]}';
    await collection.upsert(key, raw, { transcoder: new RawJsonTranscoder() });
    assert.equal((await collection.get(key, { transcoder: new RawJsonTranscoder() })).content.toString(), raw);
    assert.deepEqual((await collection.get(key)).content, { b: 2, a: [1, 2, { c: null }] });
  });

  for (const flags of [0x00000000, 0x03000000, 0x04000000, 0x12345678, 0xffffffff]) {
    it(`round-trips flags 0x${flags.toString(16)}`, async () => {
      const key = uniqueKey(`flags-${flags}`);
      await collection.upsert(key, Buffer.from('payload'), { transcoder: new FlagsTranscoder(flags) });
      const { content } = await collection.get(key, { transcoder: new FlagsTranscoder(0) });
      assert.equal(content.bytes.toString(), 'payload');
      assert.equal(content.flags >>> 0, flags);
    });
  }

  it('keeps zero flags on a JSON body', async () => {
    // Flags are opaque to the server: a JSON body written with flags 0 (legacy clients) reads back
    // with flags 0, not with the JSON common flags.
    const key = uniqueKey('zero-flags-json');
    await collection.upsert(key, Buffer.from('{"a": 1}'), { transcoder: new FlagsTranscoder(0) });
    const { content } = await collection.get(key, { transcoder: new FlagsTranscoder(0) });
    assert.equal(content.bytes.toString(), '{"a": 1}');
    assert.equal(content.flags >>> 0, 0);
  });

  it('round-trips non-object JSON values', async () => {
    const key = uniqueKey('non-object');
    const values = ['just a string', [1, 2, 3], 12.5, true, null];
    for (const [n, value] of values.entries()) {
      await collection.upsert(`${key}::${n}`, value);
      assert.deepEqual((await collection.get(`${key}::${n}`)).content, value);
    }
  });

  it('round-trips empty and 1 MiB binary values', async () => {
    const key = uniqueKey('sizes');
    const transcoder = new RawBinaryTranscoder();
    for (const [suffix, value] of [['empty', Buffer.alloc(0)], ['large', Buffer.concat(Array(4096).fill(EVERY_BYTE))]]) {
      await collection.upsert(`${key}::${suffix}`, value, { transcoder });
      assert.deepEqual((await collection.get(`${key}::${suffix}`, { transcoder })).content, value, suffix);
    }
  });
});
