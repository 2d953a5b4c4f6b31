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

/**
 * What a 401 from the worker means: 'no-tokens' when the worker has none configured (no token
 * typed here could work: say so, do not ask), else 'needs-token' (none sent, or refused).
 * The HTTP API says "no token is configured on this worker" in its message (app/shell/http/api.py).
 */
export function unauthorizedReason(body) {
  const reason = body?.details?.reason;
  if (reason === 'no-tokens' || /no token is configured/i.test(body?.message ?? '')) return 'no-tokens';
  return 'needs-token';
}

export const NO_TOKENS_MESSAGE =
  'This worker has no token configured (A2UI_STREAM_HTTP_TOKENS is not set), so it answers no run request ' +
  'and no token typed here can work. Set A2UI_STREAM_HTTP_TOKENS on the worker and restart it, then enter one ' +
  'of its tokens here; `a2ui-stream up` needs none. This page checks again every few seconds.';

/** Why the run list answered 401: the list itself does not say whether tokens are configured,
 * a run endpoint does, so ask one (its answer holds no run data). */
export async function probeUnauthorized() {
  try {
    const response = await fetch('/runs/a2ui-stream-viewer-auth-probe', { headers: authHeaders(), cache: 'no-store' });
    if (response.status !== 401) return 'needs-token';
    return unauthorizedReason(await response.json().catch(() => null));
  } catch {
    return 'needs-token';
  }
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
