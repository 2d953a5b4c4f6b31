// Server-Sent Events over fetch (WHATWG HTML §9.2 parsing), instead of EventSource, because
// EventSource cannot send an Authorization header or choose its Last-Event-ID: with fetch the
// viewer works on a worker that requires a bearer token (never put in a URL, where it would
// land in logs and history) and decides itself where a reconnection resumes (after the last
// sequence it applied, or from the beginning for a resync).

export class HttpStatusError extends Error {
  constructor(status, body) {
    super(`HTTP ${status}${body?.error ? ` ${body.error}` : ''}${body?.message ? `: ${body.message}` : ''}`);
    this.status = status;
    this.body = body;
  }
}

/**
 * Read one SSE response. `onFrame({id, event, data})` is called per dispatched message. Resolves
 * when the server closes the stream, rejects with HttpStatusError on a non-2xx answer (its JSON
 * error envelope attached) or with the fetch/abort error.
 */
export async function readSse(url, { headers = {}, signal, onOpen, onFrame }) {
  const response = await fetch(url, {
    headers: { Accept: 'text/event-stream', ...headers },
    signal,
    cache: 'no-store',
  });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new HttpStatusError(response.status, body);
  }
  onOpen?.();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let data = [];
  let event = '';
  let id = null; // the last event ID buffer persists across messages (§9.2.6)
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (;;) {
      const match = /\r\n|\n|\r(?=[^\n])/.exec(buffer);
      if (!match) break; // an incomplete line (or a lone \r that may be half of \r\n)
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      if (line === '') {
        if (data.length) onFrame({ id, event: event || 'message', data: data.join('\n') });
        data = [];
        event = '';
        continue;
      }
      if (line.startsWith(':')) continue; // a comment (keep-alive)
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let fieldValue = colon < 0 ? '' : line.slice(colon + 1);
      if (fieldValue.startsWith(' ')) fieldValue = fieldValue.slice(1);
      if (field === 'data') data.push(fieldValue);
      else if (field === 'event') event = fieldValue;
      else if (field === 'id' && !fieldValue.includes('\0')) id = fieldValue;
    }
  }
}
