// Databases: the list with document counts and sizes (`GET /_dbs_info`, a page at a time),
// create (`PUT /{db}?q=` — q is the number of vbuckets) and delete (`DELETE /{db}`, after the
// name is typed again). Also the database picker the other pages share.

import * as api from '../api.js';
import { h, show, table, failure, bytes, number, link, field } from '../ui.js';

const PAGE_SIZE = 50;
const LAST_DB_KEY = 'settee.console.db';

export async function render(root, [skipText] = []) {
  const skip = Math.max(0, Number.parseInt(skipText || '0', 10) || 0);
  const list = h('div', { id: 'db-list' }, h('p', { class: 'muted' }, 'Loading…'));
  show(root, h('h2', {}, 'Databases'), createForm(), list);
  await fill(list, skip);
}

function createForm() {
  const name = h('input', { name: 'db-name', placeholder: 'new database name', required: true, pattern: '[a-z][a-z0-9_$\\(\\)+\\/\\-]*' });
  const q = h('input', { name: 'db-q', type: 'number', min: 1, max: 1024, placeholder: 'node default' });
  const form = h('form', { id: 'create-db', class: 'row' },
    field('Name', name),
    field('q (vbuckets)', q),
    h('button', { type: 'submit' }, 'Create database'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await api.put(api.dbPath(name.value), undefined, { q: q.value });
      remember(name.value);
      window.location.hash = link('documents', name.value);
    } catch (error) {
      failure(error);
    }
  });
  return form;
}

async function fill(list, skip) {
  const infos = await api.get('/_dbs_info', { limit: PAGE_SIZE + 1, skip });
  const rows = infos.slice(0, PAGE_SIZE).map(({ key, info, error }) => [
    h('a', { href: link('documents', key), class: 'db-link' }, key),
    info ? number(info.doc_count) : error,
    info ? number(info.doc_del_count) : '',
    info ? bytes(info.sizes.external) : '',
    info ? bytes(info.sizes.file) : '',
    info && info.cluster ? String(info.cluster.q) : '',
    h('span', { class: 'actions' },
      h('a', { href: link('queries', key) }, 'query'), ' ',
      h('a', { href: link('indexes', key) }, 'indexes'), ' ',
      key.startsWith('_') ? '' : h('button', { class: 'danger small', onclick: () => remove(key, list, skip) }, 'Delete')),
  ]);
  const pager = h('p', { class: 'pager' },
    skip > 0 ? h('a', { href: link('databases', String(Math.max(0, skip - PAGE_SIZE))) }, '← previous') : '',
    ` ${skip + 1}–${skip + rows.length} `,
    infos.length > PAGE_SIZE ? h('a', { href: link('databases', String(skip + PAGE_SIZE)) }, 'next →') : '');
  show(list,
    table(['Name', 'Documents', 'Deleted', 'Data size', 'Disk size', 'q', ''], rows, { id: 'db-table' }),
    pager);
}

async function remove(db, list, skip) {
  const typed = window.prompt(`Delete the database ${db} and every document in it? Type its name to confirm.`);
  if (typed !== db) return;
  try {
    await api.del(api.dbPath(db));
    await fill(list, skip);
  } catch (error) {
    failure(error);
  }
}

/// The database the user worked on last, for pages opened from the navigation.
export function remembered() {
  return window.sessionStorage.getItem(LAST_DB_KEY);
}

export function remember(db) {
  window.sessionStorage.setItem(LAST_DB_KEY, db);
}

/// For a page that needs a database: the one named, else the remembered one (the hash is
/// rewritten to name it), else a choice of all of them. Returns the name or null.
export async function chosen(root, page, db) {
  if (db) {
    remember(db);
    return db;
  }
  const last = remembered();
  if (last) {
    window.location.replace(link(page, last));
    return null;
  }
  const names = await api.get('/_all_dbs', { limit: 500 });
  show(root, h('h2', {}, 'Choose a database'),
    names.length
      ? h('ul', { class: 'db-choice' }, names.map((name) => h('li', {}, h('a', { href: link(page, name) }, name))))
      : h('p', {}, 'No databases yet: ', h('a', { href: link('databases') }, 'create one'), '.'));
  return null;
}

/// A small header naming the database, with a way to switch to another.
export async function header(page, db, title) {
  const names = await api.get('/_all_dbs', { limit: 500 }).catch(() => [db]);
  const chooser = h('select', { id: 'db-switch', onchange: (event) => { window.location.hash = link(page, event.target.value); } },
    (names.includes(db) ? names : [db, ...names]).map((name) => h('option', { value: name, selected: name === db }, name)));
  return h('div', { class: 'page-head' }, h('h2', {}, title), chooser);
}
