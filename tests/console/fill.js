// Fills a database with N small documents (doc000000...) and one view and one Mango index,
// for run.sh's BENCH_DOCS: `_bulk_docs` in batches, as admin. Usage: node fill.js DB N
const [db, countText] = process.argv.slice(2);
const count = Number(countText);
const base = process.env.SETTEE_URL;
const auth = `Basic ${Buffer.from('admin:secret').toString('base64')}`;
const BATCH = 5000;

async function call(method, path, body) {
  const response = await fetch(`${base}${path}`, {
    method, headers: { Authorization: auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

(async () => {
  const width = String(count).length + 1;
  for (let start = 0; start < count; start += BATCH) {
    const docs = [];
    for (let i = start; i < Math.min(count, start + BATCH); i += 1) {
      docs.push({ _id: `doc${String(i).padStart(width, '0')}`, n: i, group: i % 100, name: `name ${i}` });
    }
    await call('POST', `/${db}/_bulk_docs`, { docs });
  }
  await call('PUT', `/${db}/_design/bench`, { views: { by_group: { map: 'function (doc) { emit(doc.group, 1); }', reduce: '_count' } } });
  await call('POST', `/${db}/_index`, { index: { fields: ['group'] }, name: 'by-group' });
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
