// Live line charts over uPlot (vendored: vendor/uplot-*/, loaded by index.html as the global
// `uPlot`), and the Prometheus text format the node's `_prometheus` endpoint writes.

const POINTS_MAX = 120;
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04',
  '#db2777', '#4b5563', '#65a30d', '#7c3aed', '#0d9488'];

/// A chart whose series may come and go: `push(time, {label: value})` adds a point to every
/// series (a missing value is a gap); a new label rebuilds the chart with the history kept.
export class LiveChart {
  constructor(element, { title, format = (value) => String(value), min } = {}) {
    this.element = element;
    this.title = title;
    this.format = format;
    this.min = min;
    this.times = [];
    this.series = new Map();
    this.plot = null;
  }

  push(time, values) {
    for (const label of Object.keys(values)) {
      if (!this.series.has(label)) {
        this.series.set(label, new Array(this.times.length).fill(null));
        this.destroyPlot();
      }
    }
    this.times.push(time);
    for (const [label, points] of this.series) {
      const value = values[label];
      points.push(value === undefined || Number.isNaN(value) ? null : value);
    }
    if (this.times.length > POINTS_MAX) {
      this.times.shift();
      for (const points of this.series.values()) points.shift();
    }
    this.draw();
    this.element.dataset.points = String(this.times.length);
    this.element.dataset.series = String(this.series.size);
  }

  data() {
    return [this.times, ...this.series.values()];
  }

  draw() {
    if (this.plot) {
      this.plot.setData(this.data());
      return;
    }
    const labels = [...this.series.keys()];
    const format = this.format;
    const options = {
      title: this.title,
      width: Math.max(280, this.element.clientWidth || 480),
      height: 200,
      scales: { x: { time: true }, y: this.min === undefined ? {} : { range: (u, low, high) => [this.min, Math.max(high, this.min + 1)] } },
      axes: [{}, { size: 70, values: (u, ticks) => ticks.map(format) }],
      series: [{}, ...labels.map((label, index) => ({
        label,
        stroke: COLORS[index % COLORS.length],
        width: 1.5,
        value: (u, value) => (value === null ? '–' : format(value)),
      }))],
      legend: { live: true },
    };
    this.plot = new globalThis.uPlot(options, this.data(), this.element);
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: Math.max(280, this.element.clientWidth), height: 200 });
  }

  destroyPlot() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

/// Prometheus text format 0.0.4 -> Map(name -> [{labels, value}]).
export function parsePrometheus(text) {
  const families = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    if (match[3]) {
      for (const pair of match[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[pair[1]] = pair[2];
      }
    }
    if (!families.has(match[1])) families.set(match[1], []);
    families.get(match[1]).push({ labels, value: Number(match[4]) });
  }
  return families;
}

/// For histogram `name` grouped by `label`: {key: {count, buckets: [[le, cumulative]]}}.
export function histograms(families, name, label) {
  const byKey = {};
  for (const { labels, value } of families.get(`${name}_count`) || []) {
    byKey[labels[label]] = { count: value, buckets: [] };
  }
  for (const { labels, value } of families.get(`${name}_bucket`) || []) {
    const entry = byKey[labels[label]];
    if (entry) entry.buckets.push([labels.le === '+Inf' ? Infinity : Number(labels.le), value]);
  }
  for (const entry of Object.values(byKey)) entry.buckets.sort((a, b) => a[0] - b[0]);
  return byKey;
}

/// The rate and the 99th percentile of what a histogram recorded between two samples:
/// {perSecond, p99Seconds} (p99 is the upper bound of the bucket holding it; null when
/// nothing was recorded).
export function interval(before, after, seconds) {
  const count = after.count - (before ? before.count : 0);
  if (!before || count <= 0 || seconds <= 0) return { perSecond: before ? 0 : null, p99Seconds: null };
  const wanted = count * 0.99;
  let p99Seconds = null;
  for (let index = 0; index < after.buckets.length; index += 1) {
    const [le, cumulative] = after.buckets[index];
    const previous = before.buckets[index] ? before.buckets[index][1] : 0;
    if (cumulative - previous >= wanted) {
      p99Seconds = Number.isFinite(le) ? le : (index > 0 ? after.buckets[index - 1][0] : null);
      break;
    }
  }
  return { perSecond: count / seconds, p99Seconds };
}
