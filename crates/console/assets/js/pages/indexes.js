// Indexes of one database: each design document's views (rows from the view's `total_rows`,
// read with update=false so looking never starts a build; size and whether the updater runs
// from `/_design/{d}/_info`), the Mango indexes (`GET /{db}/_index`), and build progress from
// the `indexer` entries of `_active_tasks`, refreshed every 2 s.

import * as api from '../api.js';
import { h, show, table, bytes, number, every } from '../ui.js';
import { chosen, header } from './databases.js';

const REFRESH_MS = 2000;

export async function render(root, [dbName] = []) {
  const db = await chosen(root, 'indexes', dbName);
  if (!db) return undefined;
  const [head, designs, mango] = await Promise.all([
    header('indexes', db, 'Indexes'),
    api.get(`${api.dbPath(db)}/_design_docs`, { include_docs: true }),
    api.get(`${api.dbPath(db)}/_index`),
  ]);
  const viewDesigns = designs.rows.filter((row) => row.doc && row.doc.language !== 'query' && row.doc.views);
  const views = h('div', { id: 'view-indexes' });
  const progress = h('div', { id: 'index-progress' });
  show(root, head,
    h('section', { class: 'card' }, h('h3', {}, 'Build progress'), progress),
    h('section', { class: 'card' }, h('h3', {}, 'Design documents'), views),
    h('section', { class: 'card' }, h('h3', {}, 'Mango indexes'), mangoTable(mango.indexes)));
  const rows = await viewRows(db, viewDesigns);
  return every(REFRESH_MS, async () => {
    const [tasks, infos] = await Promise.all([
      api.get('/_active_tasks'),
      Promise.all(viewDesigns.map((row) => api.get(`${api.docPath(db, row.id)}/_info`).catch(() => null))),
    ]);
    showProgress(progress, tasks.filter((task) => task.type === 'indexer' && task.database === db));
    show(views, viewDesigns.length === 0
      ? h('p', { class: 'muted' }, 'No design document with views.')
      : table(['design document', 'views', 'rows', 'size', 'updater'], viewDesigns.map((row, index) => {
        const info = infos[index] && infos[index].view_index;
        return [
          h('a', { href: `#/document/${encodeURIComponent(db)}/${encodeURIComponent(row.id)}` }, row.id),
          Object.keys(row.doc.views).join(', '),
          rows[row.id] || '',
          info ? bytes(info.sizes.file) : '–',
          info ? (info.updater_running ? 'running' : 'idle') : '–',
        ];
      }), { id: 'design-table' }));
  });
}

/// `total_rows` of each view, without building anything.
async function viewRows(db, designs) {
  const counts = {};
  await Promise.all(designs.map(async (row) => {
    const name = row.id.slice('_design/'.length);
    const parts = await Promise.all(Object.keys(row.doc.views).map(async (view) => {
      const path = `${api.dbPath(db)}/_design/${encodeURIComponent(name)}/_view/${encodeURIComponent(view)}`;
      try {
        const result = await api.get(path, { limit: 0, update: 'false', reduce: 'false' });
        return `${view}: ${number(result.total_rows)}`;
      } catch {
        return `${view}: –`;
      }
    }));
    counts[row.id] = parts.join(', ');
  }));
  return counts;
}

function showProgress(place, tasks) {
  if (tasks.length === 0) {
    show(place, h('p', { class: 'muted' }, 'No index is being built.'));
    return;
  }
  show(place, tasks.map((task) => h('div', { class: 'progress-row' },
    h('span', {}, task.design_document),
    h('progress', { max: 100, value: task.progress }),
    h('span', {}, `${task.progress}% (${number(task.changes_done)} of ${number(task.total_changes)} changes)`))));
}

function mangoTable(indexes) {
  return table(['name', 'design document', 'type', 'fields'], indexes.map((index) => [
    index.name, index.ddoc || '', index.type,
    h('code', {}, JSON.stringify((index.def && index.def.fields) || [])),
  ]), { id: 'mango-indexes' });
}
