// Every request the console makes: same origin only, the session cookie sent by the browser
// (`credentials: 'same-origin'`), JSON in and out. A 401 from any data call means the session
// ended: main.js listens for `settee:unauthorized` and shows the login form again.

export class ApiError extends Error {
  constructor(status, body) {
    const reason = body && typeof body === 'object' ? `${body.error}: ${body.reason}` : String(body);
    super(`${status} ${reason}`);
    this.status = status;
    this.body = body;
  }
}

/// path: an absolute path on this node ('/_session'); query: an object of parameters, each
/// JSON-encoded when `json` names it (CouchDB's key/startkey/endkey/keys).
export async function request(method, path, { body, query, json = [], text = false } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value === undefined || value === null || value === '') continue;
      params.set(name, json.includes(name) ? JSON.stringify(value) : String(value));
    }
    const encoded = params.toString();
    if (encoded) url += `?${encoded}`;
  }
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const payload = text ? await response.text() : await parsed(response);
  if (response.status === 401 && path !== '/_session') {
    window.dispatchEvent(new CustomEvent('settee:unauthorized'));
  }
  if (!response.ok) throw new ApiError(response.status, payload);
  return payload;
}

async function parsed(response) {
  const raw = await response.text();
  try {
    return raw ? JSON.parse(raw) : null;
  } catch {
    return raw;
  }
}

export const get = (path, query, options = {}) => request('GET', path, { ...options, query });
export const post = (path, body, query) => request('POST', path, { body, query });
export const put = (path, body, query) => request('PUT', path, { body, query });
export const del = (path, query) => request('DELETE', path, { query });

/// `/{db}` with the name encoded (`/` in a name is `%2F`, as CouchDB wants it).
export function dbPath(db) {
  return `/${encodeURIComponent(db)}`;
}

/// `/{db}/{id}`: design and local documents keep their prefix as a path segment.
export function docPath(db, id) {
  for (const prefix of ['_design/', '_local/']) {
    if (id.startsWith(prefix)) {
      return `${dbPath(db)}/${prefix}${encodeURIComponent(id.slice(prefix.length))}`;
    }
  }
  return `${dbPath(db)}/${encodeURIComponent(id)}`;
}

export function attachmentPath(db, id, name) {
  return `${docPath(db, id)}/${name.split('/').map(encodeURIComponent).join('/')}`;
}

export const session = () => request('GET', '/_session');
export const login = (name, password) => request('POST', '/_session', { body: { name, password } });
export const logout = () => request('DELETE', '/_session');
