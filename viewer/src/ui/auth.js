// The bearer token for a worker that requires one (A2UI_STREAM_HTTP_AUTH=on). It is typed into
// the page, kept in sessionStorage (this tab only) and sent as an Authorization header; never
// put in a URL. `a2ui-stream up` (the embedded laptop mode) runs with auth off: no token needed.

const KEY = 'a2ui-stream.viewer.token';
const listeners = new Set();

export function token() {
  try {
    return sessionStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  } catch {
    /* storage disabled: the token lives as long as the page */
  }
  for (const listener of [...listeners]) listener();
}

export function authHeaders() {
  const value = token();
  return value ? { Authorization: `Bearer ${value}` } : {};
}

/** A promise that resolves the next time the token is set. */
export function tokenChanged() {
  return new Promise(resolve => {
    const once = () => {
      listeners.delete(once);
      resolve();
    };
    listeners.add(once);
  });
}
