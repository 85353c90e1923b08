// Queries on one database: a view (`GET /{db}/_design/{d}/_view/{v}` with the options typed as
// a query string), a Mango query (`POST /{db}/_find`) with its plan (`POST /{db}/_explain`),
// and a sub-document lookup (`POST /{db}/{id}/_lookup`, settee's endpoint over the same engine
// calls as the KV door's).

import * as api from '../api.js';
import { h, show, table, failure, field, parseJson, pretty, select } from '../ui.js';
import { chosen, header } from './databases.js';

const ROWS_SHOWN_MAX = 100;

export async function render(root, [dbName] = []) {
  const db = await chosen(root, 'queries', dbName);
  if (!db) return;
  const [head, designs] = await Promise.all([
    header('queries', db, 'Queries'),
    api.get(`${api.dbPath(db)}/_design_docs`, { include_docs: true }),
  ]);
  show(root, head, viewSection(db, designs.rows), mangoSection(db), lookupSection(db));
}

function viewSection(db, designRows) {
  const views = [];
  for (const row of designRows) {
    const name = row.id.slice('_design/'.length);
    for (const view of Object.keys((row.doc && row.doc.views) || {})) views.push(`${name}/${view}`);
  }
  const output = h('div', { id: 'view-result' });
  if (views.length === 0) {
    return h('section', { class: 'card' }, h('h3', {}, 'View'),
      h('p', { class: 'muted' }, 'No design document with views in this database.'));
  }
  const chosenView = select(views, views[0], { id: 'view-name' });
  const options = h('input', { id: 'view-options', value: 'limit=20', size: 40 });
  const form = h('form', { class: 'row' },
    field('View', chosenView), field('Options', options), h('button', { type: 'submit', id: 'run-view' }, 'Run view'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const [design, view] = chosenView.value.split('/');
    const path = `${api.dbPath(db)}/_design/${encodeURIComponent(design)}/_view/${encodeURIComponent(view)}`;
    const query = Object.fromEntries(new URLSearchParams(options.value));
    show(output, h('p', { class: 'muted' }, 'Running…'));
    try {
      const started = performance.now();
      const result = await api.get(path, query);
      const took = Math.round(performance.now() - started);
      show(output,
        h('p', { class: 'muted' }, `${result.rows.length} rows`,
          result.total_rows !== undefined ? ` of ${result.total_rows}` : '', ` in ${took} ms`),
        table(['key', 'value', 'id'], result.rows.slice(0, ROWS_SHOWN_MAX).map((row) => [
          h('code', {}, JSON.stringify(row.key)), h('code', {}, JSON.stringify(row.value)), row.id || '',
        ]), { id: 'view-rows' }));
    } catch (error) {
      failure(error, output);
    }
  });
  return h('section', { class: 'card' }, h('h3', {}, 'View'), form, output);
}

function mangoSection(db) {
  const query = h('textarea', { id: 'mango-query', rows: 6, spellcheck: 'false' },
    pretty({ selector: {}, limit: 20, execution_stats: true }));
  const output = h('div', { id: 'mango-result' });
  const run = async (endpoint) => {
    show(output, h('p', { class: 'muted' }, 'Running…'));
    try {
      const body = parseJson(query.value, 'The query');
      const result = await api.post(`${api.dbPath(db)}/${endpoint}`, body);
      if (endpoint === '_explain') {
        const index = result.index || {};
        show(output,
          h('p', { id: 'explain-index' }, `Index: ${index.ddoc || ''} ${index.name || ''} (${index.type || ''})`),
          h('pre', { id: 'explain-json' }, pretty(result)));
        return;
      }
      show(output,
        h('p', { class: 'muted' }, `${result.docs.length} documents`,
          result.execution_stats ? `, ${result.execution_stats.total_docs_examined} examined in ${result.execution_stats.execution_time_ms.toFixed(1)} ms` : ''),
        result.warning ? h('p', { class: 'warning' }, result.warning) : '',
        table(['_id', 'document'], result.docs.slice(0, ROWS_SHOWN_MAX).map((doc) => [
          doc._id || '', h('code', {}, JSON.stringify(doc)),
        ]), { id: 'mango-docs' }));
    } catch (error) {
      failure(error, output);
    }
  };
  return h('section', { class: 'card' },
    h('h3', {}, 'Mango'),
    query,
    h('div', { class: 'row' },
      h('button', { id: 'run-find', onclick: () => run('_find') }, 'Run _find'),
      h('button', { id: 'run-explain', class: 'secondary', onclick: () => run('_explain') }, 'Explain')),
    output);
}

function lookupSection(db) {
  const id = h('input', { id: 'lookup-id', placeholder: 'document id' });
  const paths = h('input', { id: 'lookup-paths', placeholder: 'paths, comma separated: a.b, c[0]', size: 40 });
  const output = h('div', { id: 'lookup-result' });
  const form = h('form', { class: 'row' },
    field('Document', id), field('Paths', paths), h('button', { type: 'submit', id: 'run-lookup' }, 'Look up'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const specs = paths.value.split(',').map((path) => path.trim()).filter(Boolean)
      .map((path) => ({ op: 'get', path }));
    try {
      const result = await api.post(`${api.docPath(db, id.value)}/_lookup`, { specs });
      show(output, table(['path', 'status', 'value'], specs.map((spec, index) => {
        const outcome = result.results[index] || {};
        return [spec.path, outcome.status, h('code', {}, JSON.stringify(outcome.value))];
      }), { id: 'lookup-rows' }));
    } catch (error) {
      failure(error, output);
    }
  });
  return h('section', { class: 'card' }, h('h3', {}, 'Sub-document lookup'), form, output);
}
