// The web console in a real browser: Debian's Chromium, headless, driven by playwright-core
// (which downloads no browser), against a real `settee serve` that run.sh started.
//   SETTEE_URL  the node (http://127.0.0.1:PORT), admin:secret
//   OUTPUT_DIR  where the screenshots and page load times go
//   BENCH_DB    optional: a database already filled by run.sh; its pages' load times are
//               measured (reported, not asserted)
// One scenario, in order: nothing but the login form without a session; log in; create a
// database; create and edit a document (its revision changes), see its conflicts and
// attachment; run a view, a _find with its _explain and a sub-document lookup; see the
// overview's charts get new points; every request the pages made went to the node itself.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const BASE = process.env.SETTEE_URL;
const OUTPUT = process.env.OUTPUT_DIR;
const DB = 'console_test';
const STEP_TIMEOUT_MS = 15000;

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

test('the console in headless Chromium', { timeout: 110000 }, async () => {
  assert.ok(BASE && OUTPUT, 'SETTEE_URL and OUTPUT_DIR are set by run.sh');
  fs.mkdirSync(OUTPUT, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-console-chromium-'));
  // launchPersistentContext is how playwright passes --user-data-dir: a fresh profile.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 900 },
  });
  const requested = [];
  context.on('request', (request) => requested.push(request.url()));
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  // Failed API calls are logged by Chromium too; the ones expected here (401 before login,
  // 404 from /_node/_local/_cluster on a single node) are not problems, a console file that
  // does not load is.
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
  page.on('response', (answer) => {
    if (answer.url().startsWith(`${BASE}/_utils/`) && answer.status() >= 400) problems.push(`${answer.status()} ${answer.url()}`);
  });
  const shot = (name) => page.screenshot({ path: path.join(OUTPUT, `${name}.png`), fullPage: true });
  const loaded = (name) => page.waitForSelector(`.page[data-page="${name}"][data-loaded="true"]`);
  // Opens a console route and waits for its page; the shown page's marker is dropped first so
  // a page of the same name still on screen is not taken for the new one.
  const visit = async (hash, name) => {
    await page.evaluate(() => window.document.querySelectorAll('.page').forEach((shown) => shown.removeAttribute('data-loaded')));
    const url = `${BASE}/_utils/${hash}`;
    if (page.url() === url) await page.reload(); else await page.goto(url);
    await loaded(name);
  };
  // A request made by the page itself, with its cookie.
  const call = (method, url, body) => page.evaluate(async ([m, u, b]) => {
    const response = await fetch(u, { method: m, headers: { 'Content-Type': 'application/json' }, body: b === undefined ? undefined : JSON.stringify(b) });
    return { status: response.status, body: await response.json().catch(() => null) };
  }, [method, url, body]);

  try {
    // Without a session: the login form, no navigation, no data page, and the APIs refuse.
    const response = await page.goto(`${BASE}/_utils`);
    assert.equal(new URL(page.url()).pathname, '/_utils/', `/_utils redirects to /_utils/ (${response.status()} ${await response.text()})`);
    assert.equal(response.status(), 200);
    await page.waitForSelector('form#login');
    assert.equal(await page.isVisible('#nav'), false);
    await page.goto(`${BASE}/_utils/#/databases`);
    await page.waitForSelector('form#login');
    assert.equal(await page.$('.page'), null, 'no data page without a session');
    assert.equal((await call('GET', '/_all_dbs')).status, 401);
    assert.equal((await call('GET', '/_node/_local/_system')).status, 401);
    await shot('login');

    // A wrong password is refused in the form.
    await page.fill('form#login input[name=name]', 'admin');
    await page.fill('form#login input[name=password]', 'wrong');
    await page.click('form#login button[type=submit]');
    await page.waitForSelector('form#login .error:text("incorrect")');

    // Log in: the page asked for before logging in opens; then the overview, its charts
    // getting new points.
    await page.fill('form#login input[name=password]', 'secret');
    await page.click('form#login button[type=submit]');
    await loaded('databases');
    assert.equal(await page.isVisible('#nav'), true);
    await page.click('nav a[data-page=overview]');
    await loaded('overview');
    await page.waitForSelector('#node-table td');
    await page.waitForFunction(() => Number(document.querySelector('#chart-cpu').dataset.points || 0) >= 2);
    const before = Number(await page.getAttribute('#chart-ops', 'data-points'));
    await page.waitForFunction((n) => Number(document.querySelector('#chart-ops').dataset.points) > n, before);
    await page.waitForSelector('#chart-ops .u-series');
    assert.ok(await page.$('[data-later="vbucket map"]'), 'the vbucket map has its marked place');

    // Create a database with q = 8 vbuckets.
    await page.click('nav a[data-page=databases]');
    await loaded('databases');
    await page.fill('input[name=db-name]', DB);
    await page.fill('input[name=db-q]', '8');
    await page.click('form#create-db button[type=submit]');
    await loaded('documents');
    const info = await call('GET', `/${DB}`);
    assert.equal(info.status, 200);
    assert.equal(info.body.cluster.q, 8);
    await page.click('nav a[data-page=databases]');
    await page.waitForSelector(`#db-table a.db-link:text-is("${DB}")`);
    await shot('databases');

    // Create a document, then edit it: the revision changes.
    await visit(`#/document/${DB}`, 'document');
    await page.fill('#doc-json', JSON.stringify({ _id: 'doc1', n: 1, name: 'first' }));
    await page.click('#create-doc');
    await page.waitForSelector('#doc-rev:text-matches("^1-")');
    const first = await page.textContent('#doc-rev');
    const edited = JSON.parse(await page.inputValue('#doc-json'));
    edited.n = 2;
    await page.fill('#doc-json', JSON.stringify(edited));
    await page.click('#save-doc');
    await page.waitForSelector('#doc-rev:text-matches("^2-")');
    const second = await page.textContent('#doc-rev');
    assert.notEqual(first, second);
    assert.equal((await call('GET', `/${DB}/doc1`)).body._rev, second);

    // A conflicting revision and an attachment show on the document's page.
    const conflict = await call('POST', `/${DB}/_bulk_docs`, { new_edits: false, docs: [{ _id: 'doc1', _rev: '2-ffffffffffffffffffffffffffffffff', n: 99, name: 'first' }] });
    assert.equal(conflict.status, 201);
    const winner = (await call('GET', `/${DB}/doc1`)).body._rev;
    const loser = winner === second ? '2-ffffffffffffffffffffffffffffffff' : second;
    const attached = await page.evaluate(async ([db, rev]) => (await fetch(`/${db}/doc1/hello.txt?rev=${rev}`, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'hello, console' })).status, [DB, winner]);
    assert.equal(attached, 201);
    await visit(`#/document/${DB}/doc1`, 'document');
    await page.waitForSelector(`#doc-conflicts a.conflict:text("${loser}")`);
    const href = await page.getAttribute('#attachments a.attachment', 'href');
    assert.equal(await page.evaluate(async (url) => (await fetch(url)).text(), href), 'hello, console');
    await shot('document');

    // A design document with a view, created in the editor.
    await visit(`#/document/${DB}`, 'document');
    await page.fill('#doc-json', JSON.stringify({ _id: '_design/app', views: { by_n: { map: 'function (doc) { if (doc.n) emit(doc.n, doc.name || null); }' } } }));
    await page.click('#create-doc');
    await page.waitForSelector('#doc-rev:text-matches("^1-")');

    // Queries: the view, _find, _explain and a sub-document lookup.
    await page.click('nav a[data-page=queries]');
    await loaded('queries');
    await page.click('#run-view');
    await page.waitForSelector('#view-rows td code');
    const keys = await page.$$eval('#view-rows tbody tr td:first-child', (cells) => cells.map((cell) => cell.textContent));
    assert.ok(keys.length >= 1 && keys.every((key) => /^\d+$/.test(key)), `view keys: ${keys}`);
    await page.fill('#mango-query', JSON.stringify({ selector: { name: 'first' }, execution_stats: true }));
    await page.click('#run-find');
    await page.waitForSelector('#mango-docs td:text-is("doc1")');
    await page.click('#run-explain');
    await page.waitForSelector('#explain-index');
    assert.match(await page.textContent('#explain-index'), /_all_docs|special/);
    await page.fill('#lookup-id', 'doc1');
    await page.fill('#lookup-paths', 'name, missing');
    await page.click('#run-lookup');
    await page.waitForSelector('#lookup-rows tbody tr');
    const lookup = await page.$$eval('#lookup-rows tbody tr', (rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent)));
    assert.deepEqual(lookup[0], ['name', 'success', '"first"']);
    assert.equal(lookup[1][1], 'path_not_found');
    await shot('queries');

    // Indexes and tasks (both poll; the view built by the query shows its rows).
    await page.click('nav a[data-page=indexes]');
    await loaded('indexes');
    await page.waitForSelector('#design-table td:text("by_n")');
    await page.waitForSelector('#mango-indexes');
    await shot('indexes');
    await page.click('nav a[data-page=tasks]');
    await loaded('tasks');
    await page.waitForSelector('#tasks-updated:text("Updated")');
    assert.ok(await page.$('[data-later="Rebalance"]'));
    await shot('tasks');

    // The overview last, with a minute's worth of points less: its charts now show the writes.
    await page.click('nav a[data-page=overview]');
    await loaded('overview');
    await page.waitForFunction(() => Number(document.querySelector('#chart-latency').dataset.points || 0) >= 4);
    await shot('overview');

    if (process.env.BENCH_DB) await measure(page, loaded, process.env.BENCH_DB);

    // Log out: the login form again, and the data APIs refuse.
    await page.click('#logout');
    await page.waitForSelector('form#login');
    assert.equal((await call('GET', '/_all_dbs')).status, 401);

    const elsewhere = requested.filter((url) => !url.startsWith(`${BASE}/`));
    assert.deepEqual(elsewhere, [], 'every request went to the node');
    assert.deepEqual(problems, [], 'no script errors');
  } catch (error) {
    // What the page showed when it failed, beside what it logged.
    await shot('failure').catch(() => {});
    fs.writeFileSync(path.join(OUTPUT, 'failure.txt'), `${problems.join('\n')}\n${await page.content().catch(() => '')}`);
    throw error;
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
});

/// Each page's load time on a large database: from opening the URL to the page showing its
/// data (`data-loaded`), and the part after the shell was ready (`data-loaded-ms`). Reported.
async function measure(page, loaded, db) {
  // fill.js's id of the middle document.
  const count = Number(process.env.BENCH_DOCS);
  const middle = `doc${String(Math.floor(count / 2)).padStart(String(count).length + 1, '0')}`;
  const pages = [
    ['overview', '#/overview'], ['databases', '#/databases'], ['documents', `#/documents/${db}`],
    ['document', `#/document/${db}/${middle}`], ['queries', `#/queries/${db}`],
    ['indexes', `#/indexes/${db}`], ['tasks', '#/tasks'],
  ];
  const lines = [];
  for (const [name, hash] of pages) {
    await page.goto('about:blank');
    const started = Date.now();
    await page.goto(`${BASE}/_utils/${hash}`);
    await loaded(name);
    const total = Date.now() - started;
    const render = await page.getAttribute(`.page[data-page="${name}"]`, 'data-loaded-ms');
    lines.push(`${name}: ${total} ms to show its data (${render} ms after the shell)`);
  }
  const report = `page load times on ${db}:\n${lines.map((line) => `  ${line}`).join('\n')}\n`;
  fs.writeFileSync(path.join(OUTPUT, 'load-times.txt'), report);
  process.stdout.write(report);
}
