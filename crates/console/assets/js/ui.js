// Small DOM helpers: the console builds its pages from these rather than from a framework.

/// h('a', {href: '#/x', class: 'y', onclick: fn}, 'text', child...) -> an element. Text is
/// always set as text, never parsed as HTML, so document contents cannot inject markup.
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/// Replaces what `element` shows.
export function show(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/// A table of `rows`, each row an array of cells (text or elements).
export function table(headings, rows, attributes = {}) {
  return h('table', attributes,
    h('thead', {}, h('tr', {}, headings.map((heading) => h('th', {}, heading)))),
    h('tbody', {}, rows.map((row) => h('tr', {}, row.map((cell) => h('td', {}, cell))))));
}

/// An error's message in the page, or the notice bar when no place is given.
export function failure(error, place) {
  const text = error && error.message ? error.message : String(error);
  if (place) return show(place, h('p', { class: 'error' }, text));
  const notice = document.getElementById('notice');
  notice.textContent = text;
  notice.hidden = false;
  setTimeout(() => { notice.hidden = true; }, 6000);
  return null;
}

export function bytes(count) {
  if (count === undefined || count === null || Number.isNaN(count)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Number(count);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function number(value) {
  return value === undefined || value === null ? '–' : Number(value).toLocaleString('en');
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/// A JSON text from a textarea, or an Error naming what is wrong.
export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

/// A labelled form control.
export function field(label, control) {
  return h('label', { class: 'field' }, h('span', {}, label), control);
}

/// A <select> of `names`, `selected` chosen.
export function select(names, selected, attributes = {}) {
  return h('select', attributes,
    names.map((name) => h('option', { value: name, selected: name === selected }, name)));
}

/// Something that comes with the cluster: a marked place, not a fake.
export function later(title, text) {
  return h('section', { class: 'later', 'data-later': title }, h('h3', {}, title), h('p', {}, text));
}

/// A console route: '#/' + the parts, each encoded (main.js decodes them).
export function link(...parts) {
  return `#/${parts.map((part) => encodeURIComponent(part)).join('/')}`;
}

/// Calls `task` now and then every `intervalMs` after each call ends (never two at once);
/// returns the function that stops it.
export function every(intervalMs, task) {
  let timer = null;
  let stopped = false;
  const run = async () => {
    try {
      await task();
    } catch (error) {
      failure(error);
    }
    if (!stopped) timer = setTimeout(run, intervalMs);
  };
  run();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
