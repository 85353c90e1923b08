// Tasks: `GET /_active_tasks` every 2 s (indexers, replications, compactions), as CouchDB
// lists them. Rebalance progress and its throttle come with the cluster.

import * as api from '../api.js';
import { h, show, table, every, later, number } from '../ui.js';

const REFRESH_MS = 2000;

export async function render(root) {
  const list = h('div', { id: 'task-list' });
  const updated = h('p', { class: 'muted', id: 'tasks-updated' });
  show(root, h('h2', {}, 'Active tasks'), updated, list,
    later('Rebalance', 'Rebalance progress and its throttle appear here once nodes share vbuckets through the cluster map; a single node has nothing to rebalance.'));
  return every(REFRESH_MS, async () => {
    const tasks = await api.get('/_active_tasks');
    updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    if (tasks.length === 0) {
      show(list, h('p', { class: 'muted' }, 'No task is running.'));
      return;
    }
    show(list, table(['type', 'database', 'what', 'progress', 'started', 'updated'], tasks.map((task) => [
      task.type,
      task.database || task.source || '',
      task.design_document || task.doc_id || task.replication_id || task.pid || '',
      task.progress !== undefined
        ? h('span', {}, h('progress', { max: 100, value: task.progress }), ` ${task.progress}%`)
        : (task.changes_done !== undefined ? `${number(task.changes_done)} changes` : ''),
      time(task.started_on),
      time(task.updated_on),
    ]), { id: 'task-table' }));
  });
}

function time(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleTimeString() : '';
}
