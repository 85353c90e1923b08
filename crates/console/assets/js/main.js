// The console's shell: the session check, the login form, the navigation and the hash router.
// Nothing but the login form is shown until `GET /_session` names a user; every page is a
// module under pages/ exporting `render(main, args)`, which may return a function that stops
// what the page started (its polling timers) when another page is opened.

import * as api from './api.js';
import { h, show, failure } from './ui.js';
import * as overview from './pages/overview.js';
import * as databases from './pages/databases.js';
import * as documents from './pages/documents.js';
import * as document from './pages/document.js';
import * as queries from './pages/queries.js';
import * as indexes from './pages/indexes.js';
import * as tasks from './pages/tasks.js';

const PAGES = { overview, databases, documents, document, queries, indexes, tasks };
// Pages highlighted in the navigation for each route name.
const NAV = { document: 'documents' };

const main = window.document.getElementById('main');
const nav = window.document.getElementById('nav');
const who = window.document.getElementById('who');
let stopPage = null;
let user = null;

async function start() {
  window.addEventListener('hashchange', route);
  window.addEventListener('settee:unauthorized', () => {
    user = null;
    loginForm('Your session ended: log in again.');
  });
  try {
    const answer = await api.session();
    user = answer && answer.userCtx && answer.userCtx.name ? answer.userCtx : null;
  } catch (error) {
    failure(error);
  }
  if (user) route(); else loginForm();
}

function loginForm(message) {
  stop();
  nav.hidden = true;
  show(who);
  const name = h('input', { name: 'name', autocomplete: 'username', required: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const status = h('p', { class: 'error', role: 'status' }, message || '');
  const form = h('form', { id: 'login', class: 'card narrow' },
    h('h2', {}, 'Log in to settee'),
    h('label', { class: 'field' }, h('span', {}, 'Name'), name),
    h('label', { class: 'field' }, h('span', {}, 'Password'), password),
    h('button', { type: 'submit' }, 'Log in'),
    status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await api.login(name.value, password.value);
      const answer = await api.session();
      user = answer.userCtx;
      route();
    } catch (error) {
      status.textContent = error.status === 401 ? 'Name or password is incorrect.' : error.message;
    }
  });
  show(main, form);
  name.focus();
}

function stop() {
  if (stopPage) {
    try { stopPage(); } catch { /* a page's cleanup never stops the next page */ }
    stopPage = null;
  }
}

/// '#/documents/db%2Fname/doc' -> ['documents', 'db/name', 'doc'].
function parseHash() {
  const parts = window.location.hash.replace(/^#\/?/, '').split('/').filter((part) => part !== '');
  return parts.map((part) => {
    try { return decodeURIComponent(part); } catch { return part; }
  });
}

async function route() {
  if (!user) return;
  stop();
  const [name = 'overview', ...args] = parseHash();
  const page = PAGES[name] || overview;
  nav.hidden = false;
  const active = NAV[name] || name;
  for (const link of nav.querySelectorAll('a')) {
    link.classList.toggle('active', link.dataset.page === active);
  }
  show(who, `${user.name}${user.roles.includes('_admin') ? ' (admin)' : ''} `,
    h('button', { class: 'link', id: 'logout', onclick: logout }, 'Log out'));
  show(main);
  const container = h('div', { class: 'page', 'data-page': name });
  main.append(container);
  const started = performance.now();
  try {
    const cleanup = await page.render(container, args);
    if (typeof cleanup === 'function') stopPage = cleanup;
  } catch (error) {
    failure(error, container);
  }
  // The browser test reads how long the page took to show its data.
  container.dataset.loadedMs = String(Math.round(performance.now() - started));
  container.dataset.loaded = 'true';
}

async function logout() {
  try { await api.logout(); } catch { /* the cookie is gone either way */ }
  user = null;
  loginForm();
}

start();
