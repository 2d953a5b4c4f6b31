// Run ids on the wire (app/core/http/wire_ids.py, identity.md §5): a runId travels in ONE path
// segment, "projected": every UTF-8 byte outside [A-Za-z0-9._-] becomes "~" + two uppercase hex
// digits ("acme/r1" -> "acme~2Fr1"). The legacy percent form is accepted on the way in.
// Pure: no DOM, no network.

const PASSTHROUGH = /^[A-Za-z0-9._-]$/;
const HEX2 = /^[0-9A-Fa-f]{2}$/;

/** The one-segment wire form of runId (the inverse of unprojectRunId). */
export function projectRunId(runId) {
  let out = '';
  for (const byte of new TextEncoder().encode(runId)) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && PASSTHROUGH.test(ch)
      ? ch
      : '~' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** The runId a path segment holds (~XX or %XX escapes, mixed), or null when malformed. */
export function unprojectRunId(segment) {
  const bytes = [];
  const encoder = new TextEncoder();
  let i = 0;
  while (i < segment.length) {
    const ch = segment[i];
    if ((ch === '~' || ch === '%') && HEX2.test(segment.slice(i + 1, i + 3))) {
      bytes.push(parseInt(segment.slice(i + 1, i + 3), 16));
      i += 3;
      continue;
    }
    if (ch === '%') return null; // a lone % is malformed RFC 3986
    const point = String.fromCodePoint(segment.codePointAt(i));
    bytes.push(...encoder.encode(point));
    i += point.length;
  }
  let runId;
  try {
    runId = new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return null;
  }
  // eslint-disable-next-line no-control-regex
  if (runId.length < 1 || runId.length > 256 || /[\u0000-\u001f\u007f-\u009f]/.test(runId)) {
    return null;
  }
  return runId;
}

/** The UTF-8 size of a string, in bytes (what a frame cost on the wire). */
export function utf8Length(text) {
  return new TextEncoder().encode(text).length;
}
