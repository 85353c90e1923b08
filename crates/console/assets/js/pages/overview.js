// Overview: the node(s) and their state (`/_membership`, and `/_node/_local/_cluster` when the
// node is in a cluster), then live charts polled every second: CPU per core, memory (from
// `/_node/_local/_system`'s `system_stats`), operations per second and p99 latency by door and
// opcode (the request histograms of `/_node/_local/_prometheus`: the HTTP door's by method,
// the KV door's by opcode), and disk figures.

import * as api from '../api.js';
import { h, show, table, bytes, number, every, later } from '../ui.js';
import { LiveChart, parsePrometheus, histograms, interval } from '../charts.js';

const POLL_MS = 1000;
const MIB = 1024 * 1024;

export async function render(root) {
  const [welcome, membership, cluster] = await Promise.all([
    api.get('/'),
    api.get('/_membership'),
    api.get('/_node/_local/_cluster').catch((error) => (error.status === 404 ? null : Promise.reject(error))),
  ]);
  const facts = h('dl', { class: 'facts', id: 'node-facts' });
  const place = (id) => h('div', { class: 'chart', id });
  const charts = {
    cpu: new LiveChart(place('chart-cpu'), { title: 'CPU by core (%)', format: (v) => `${v.toFixed(0)}%`, min: 0 }),
    memory: new LiveChart(place('chart-memory'), { title: 'Memory (MiB)', format: (v) => `${v.toFixed(0)}`, min: 0 }),
    ops: new LiveChart(place('chart-ops'), { title: 'Operations per second, by door and opcode', format: (v) => v.toFixed(v < 10 ? 1 : 0), min: 0 }),
    latency: new LiveChart(place('chart-latency'), { title: 'p99 latency (ms), by door and opcode', format: (v) => v.toFixed(v < 1 ? 2 : 1), min: 0 }),
  };
  show(root,
    h('h2', {}, 'Overview'),
    h('section', { class: 'card' }, h('h3', {}, 'Nodes'), nodes(membership, cluster), facts),
    h('section', { class: 'charts' }, Object.values(charts).map((chart) => chart.element)),
    later('vbucket map', 'Which node is active and which replica for each vbucket, hot vbuckets highlighted: this view arrives with the cluster map (the doors do not route by it yet).'),
    later('Durability and replication lag per bucket', 'Shown once replicas are placed by the cluster map.'));
  const resize = () => Object.values(charts).forEach((chart) => chart.resize());
  window.addEventListener('resize', resize);

  let previous = null;
  const stop = every(POLL_MS, async () => {
    const [system, text] = await Promise.all([
      api.get('/_node/_local/_system'),
      api.get('/_node/_local/_prometheus', undefined, { text: true }),
    ]);
    const sample = { at: performance.now() / 1000, system, metrics: parsePrometheus(text) };
    showFacts(facts, welcome, sample);
    if (previous) record(charts, previous, sample);
    previous = sample;
  });
  return () => {
    stop();
    window.removeEventListener('resize', resize);
    Object.values(charts).forEach((chart) => chart.destroyPlot());
  };
}

function nodes(membership, cluster) {
  if (!cluster) {
    return table(['node', 'state'], membership.all_nodes.map((name) => [name, 'single node, running']), { id: 'node-table' });
  }
  return table(['node', 'state', 'role', 'HTTP', 'KV', ''], cluster.members.map((member) => [
    member.name, member.state, member.role, member.http_addr || '', member.kv_addr || '',
    member.id === cluster.leader ? 'Raft leader' : '',
  ]), { id: 'node-table' });
}

function first(metrics, name) {
  const samples = metrics.get(name);
  return samples && samples.length ? samples[0].value : undefined;
}

function showFacts(place, welcome, { system, metrics }) {
  const stats = system.system_stats || {};
  const rows = [
    ['Version', `${welcome.version} (${welcome.vendor ? welcome.vendor.name : ''})`],
    ['Uptime', `${number(system.uptime)} s`],
    ['CPU cores', number(stats.cpu_cores_available)],
    ['Memory', `${bytes(stats.mem_total - stats.mem_free)} used of ${bytes(stats.mem_total)}; settee ${bytes(system.memory.other)}`],
    ['Disk (data directory)', stats.disk_total ? `${bytes(stats.disk_total - stats.disk_free)} used of ${bytes(stats.disk_total)}, ${bytes(stats.disk_free)} free` : '–'],
    ['Data files', bytes(first(metrics, 'settee_rocksdb_sst_files_bytes'))],
    ['Open databases', number(first(metrics, 'couchdb_open_databases_total'))],
  ];
  show(place, rows.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}

function record(charts, before, after) {
  const time = Date.now() / 1000;
  const seconds = after.at - before.at;

  const cores = {};
  const oldCores = (before.system.system_stats || {}).cpu_cores || [];
  ((after.system.system_stats || {}).cpu_cores || []).forEach((core, index) => {
    const old = oldCores[index];
    const total = old ? core.total_ticks - old.total_ticks : 0;
    if (total > 0) cores[`core ${index}`] = (100 * (core.busy_ticks - old.busy_ticks)) / total;
  });
  charts.cpu.push(time, cores);

  const stats = after.system.system_stats || {};
  charts.memory.push(time, {
    'host used': (stats.mem_total - stats.mem_free) / MIB,
    settee: after.system.memory.other / MIB,
  });

  const ops = {};
  const latency = {};
  for (const [door, name, label] of [
    ['http', 'settee_http_request_duration_seconds', 'method'],
    ['kv', 'kv_cmd_duration_seconds', 'opcode'],
  ]) {
    const old = histograms(before.metrics, name, label);
    const now = histograms(after.metrics, name, label);
    for (const [key, histogram] of Object.entries(now)) {
      const { perSecond, p99Seconds } = interval(old[key], histogram, seconds);
      // A series appears once its opcode is used and stays (at 0) afterwards.
      const series = `${door} ${key}`;
      if (perSecond > 0 || charts.ops.series.has(series)) ops[series] = perSecond;
      if (p99Seconds !== null) latency[series] = p99Seconds * 1000;
    }
  }
  charts.ops.push(time, ops);
  charts.latency.push(time, latency);
}
