// One document: its JSON to read and edit, its revision and conflicts, its attachments to
// download. #/document/{db}/{id} opens one (#/document/{db}/{id}/{rev} an older or conflicting
// revision), #/document/{db} creates one. Saving is a PUT with the shown _rev, so a
// concurrent change is a 409 shown to the user, never overwritten.

import * as api from '../api.js';
import { h, show, link, bytes, parseJson, pretty } from '../ui.js';
import { chosen, header } from './databases.js';

export async function render(root, [dbName, id, rev] = []) {
  const db = await chosen(root, 'documents', dbName);
  if (!db) return;
  const head = await header('documents', db, id ? `Document ${id}` : 'New document');
  if (id === undefined) {
    newDocument(root, head, db);
    return;
  }
  const doc = await api.get(api.docPath(db, id), { conflicts: true, rev });
  const editor = h('textarea', { id: 'doc-json', spellcheck: 'false', rows: 20 }, pretty(doc));
  const status = h('p', { class: 'status', id: 'doc-status' });
  const conflicts = doc._conflicts || [];
  show(root,
    head,
    h('p', { class: 'crumbs' }, h('a', { href: link('documents', db) }, `← ${db}`)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Revision'), h('dd', {}, h('code', { id: 'doc-rev' }, doc._rev)),
      h('dt', {}, 'Conflicts'),
      h('dd', { id: 'doc-conflicts' }, conflicts.length
        ? conflicts.map((other) => h('a', { href: link('document', db, id, other), class: 'conflict' }, other, ' '))
        : 'none')),
    rev ? h('p', { class: 'warning' }, `Showing revision ${rev}, not necessarily the winner. `,
      h('a', { href: link('document', db, id) }, 'Show the current one')) : '',
    editor,
    h('div', { class: 'row' },
      h('button', { id: 'save-doc', onclick: () => save(db, id, editor, status) }, 'Save'),
      h('button', { class: 'danger', id: 'delete-doc', onclick: () => remove(db, id, editor, status) }, 'Delete')),
    status,
    attachments(db, id, doc._attachments || {}));
}

function newDocument(root, head, db) {
  const editor = h('textarea', { id: 'doc-json', spellcheck: 'false', rows: 16 }, pretty({ _id: '' }));
  const status = h('p', { class: 'status', id: 'doc-status' });
  show(root, head,
    h('p', { class: 'muted' }, 'An empty _id lets the node choose one.'),
    editor,
    h('button', {
      id: 'create-doc',
      onclick: async () => {
        try {
          const body = parseJson(editor.value, 'The document');
          if (body._id === '') delete body._id;
          const saved = body._id !== undefined
            ? await api.put(api.docPath(db, body._id), body)
            : await api.post(api.dbPath(db), body);
          window.location.hash = link('document', db, saved.id);
        } catch (error) {
          status.textContent = error.message;
        }
      },
    }, 'Create'),
    status);
}

async function save(db, id, editor, status) {
  try {
    const body = parseJson(editor.value, 'The document');
    const saved = await api.put(api.docPath(db, id), body);
    const doc = await api.get(api.docPath(db, id), { conflicts: true });
    editor.value = pretty(doc);
    document.getElementById('doc-rev').textContent = saved.rev;
    status.textContent = `Saved as revision ${saved.rev}.`;
  } catch (error) {
    status.textContent = error.status === 409
      ? 'Conflict: the document changed since it was opened. Reload it to see the current revision.'
      : error.message;
  }
}

async function remove(db, id, editor, status) {
  if (!window.confirm(`Delete ${id}?`)) return;
  try {
    const { _rev: rev } = parseJson(editor.value, 'The document');
    await api.del(api.docPath(db, id), { rev });
    window.location.hash = link('documents', db);
  } catch (error) {
    status.textContent = error.message;
  }
}

function attachments(db, id, stubs) {
  const names = Object.keys(stubs);
  if (names.length === 0) return h('section', { id: 'attachments' }, h('h3', {}, 'Attachments'), h('p', { class: 'muted' }, 'none'));
  return h('section', { id: 'attachments' },
    h('h3', {}, 'Attachments'),
    h('ul', {}, names.map((name) => {
      const stub = stubs[name];
      return h('li', {},
        h('a', { href: api.attachmentPath(db, id, name), download: name.split('/').pop(), class: 'attachment' }, name),
        ` ${stub.content_type || ''}, ${bytes(stub.length)}`);
    })));
}
