// Documents: `_all_docs` a page at a time. The hash names the page's first id
// (#/documents/{db}/{startkey}); the next page starts at the row after the last shown, the
// previous one is read backwards from the first shown, so no state is kept between pages and
// every page is one short range read however many documents the database holds.

import * as api from '../api.js';
import { h, show, table, link, number } from '../ui.js';
import { chosen, header } from './databases.js';

const PAGE_SIZE = 25;

export async function render(root, [dbName, startkey] = []) {
  const db = await chosen(root, 'documents', dbName);
  if (!db) return;
  const query = { limit: PAGE_SIZE + 1, startkey };
  const [head, page] = await Promise.all([
    header('documents', db, 'Documents'),
    api.get(`${api.dbPath(db)}/_all_docs`, query, { json: ['startkey'] }),
  ]);
  const rows = page.rows.slice(0, PAGE_SIZE);
  const next = page.rows.length > PAGE_SIZE ? page.rows[PAGE_SIZE].id : null;
  const jump = h('input', { name: 'startkey', placeholder: 'go to id…', value: startkey || '' });
  const jumpForm = h('form', { class: 'row' },
    jump, h('button', { type: 'submit' }, 'Go'),
    h('a', { href: link('document', db), class: 'button', id: 'new-doc' }, 'New document'));
  jumpForm.addEventListener('submit', (event) => {
    event.preventDefault();
    window.location.hash = jump.value ? link('documents', db, jump.value) : link('documents', db);
  });
  const previous = h('button', { class: 'link', disabled: !startkey, onclick: () => goBack(db, rows[0] && rows[0].id, startkey) }, '← previous');
  show(root,
    head,
    jumpForm,
    h('p', { class: 'muted' }, `${number(page.total_rows)} documents`),
    table(['id', 'revision'], rows.map((row) => [
      h('a', { href: link('document', db, row.id), class: 'doc-link' }, row.id),
      h('code', {}, row.value.rev),
    ]), { id: 'doc-table' }),
    h('p', { class: 'pager' },
      previous, ' ',
      next !== null ? h('a', { href: link('documents', db, next), id: 'next-page' }, 'next →') : ''));
}

/// The page before the one starting at `first`: the PAGE_SIZE ids before it, read backwards.
async function goBack(db, first, startkey) {
  const from = first !== undefined ? first : startkey;
  const page = await api.get(`${api.dbPath(db)}/_all_docs`,
    { descending: true, startkey: from, skip: 1, limit: PAGE_SIZE }, { json: ['startkey'] });
  const ids = page.rows.map((row) => row.id);
  window.location.hash = ids.length === PAGE_SIZE ? link('documents', db, ids[ids.length - 1]) : link('documents', db);
}
