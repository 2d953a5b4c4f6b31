// Markdown for A2UI Text, rendered safely (issue 19 item 6).
//
// @a2ui/web_core 0.11.0's Text (basic catalog) draws body text through a `markdown` directive
// that asks its Lit context (`Context.markdown`) for a renderer and inserts what the renderer
// returns with `unsafeHTML`: "it is the responsibility of the markdown renderer to sanitize
// the HTML". Without one it shows the source literally, newlines collapsed. The optional peer
// `@a2ui/markdown-it` is not installed here; this is the viewer's own renderer, for the subset
// the basic catalog promises ("simple Markdown formatting ... without HTML, images, or
// links"), safe by construction:
//
// - every character of the input is HTML-escaped first; the only markup in the output is the
//   fixed set of tags below, with no attribute except a class of ours, so no raw HTML, no
//   script, no style and no event handler can come from the text;
// - links and images never become <a> or <img>: a link shows its text, an image its alt text
//   in brackets, so nothing navigates or fetches (a2ui-surface-no-network-egress, and the
//   action confinement: the only way out of a surface is a Button's action);
// - blocks: paragraphs (a blank line between), line breaks (a single newline), headings
//   (# to ######), bullet and numbered lists, block quotes, fenced code; inline: `code`,
//   **bold**, *italic*, ~~strikethrough~~.
//
// Pure: no DOM, no I/O; viewer/test/markdown.test.mjs checks it.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, ch => ESCAPES[ch]);
}

// Inline spans over text that is ALREADY escaped: the patterns only ever wrap escaped text in
// our own tags. Code spans are cut out first so nothing inside them is formatted.
function inline(escaped) {
  const codes = [];
  let out = escaped.replace(/`([^`\n]+)`/g, (_, code) => {
    codes.push(code);
    return `\u0000${codes.length - 1}\u0000`;
  });
  // ![alt](src) and [text](href): text only, never a link or an image
  out = out.replace(/!\[([^\]\n]*)\]\([^)\n]*\)/g, (_, alt) => (alt ? `[${alt}]` : ''));
  out = out.replace(/\[([^\]\n]+)\]\([^)\n]*\)/g, '<span class="md-link">$1</span>');
  out = out.replace(/\*\*(?=\S)([^*\n]*?\S)\*\*|__(?=\S)([^_\n]*?\S)__/g, (_, a, b) => `<strong>${a ?? b}</strong>`);
  out = out.replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?!\*)/g, '$1<em>$2</em>');
  out = out.replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?![_\w])/g, '$1<em>$2</em>');
  out = out.replace(/~~(?=\S)([^~\n]*?\S)~~/g, '<del>$1</del>');
  return out.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
}

const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}\d{1,9}[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}&gt;\s?(.*)$/;
const FENCE = /^\s{0,3}(```|~~~)/;

/** The HTML for markdown `text`: escaped, with only the viewer's own tags (see above). */
export function renderMarkdown(text) {
  // NUL is the code-span placeholder below: none may come from the text
  const lines = escapeHtml(String(text ?? '').replace(/\u0000/g, '')).replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) blocks.push(`<p>${paragraph.map(inline).join('<br>')}</p>`);
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (FENCE.test(line)) {
      flush();
      const fence = FENCE.exec(line)[1];
      const code = [];
      for (i += 1; i < lines.length && !lines[i].trimStart().startsWith(fence); i += 1) code.push(lines[i]);
      blocks.push(`<pre><code>${code.join('\n')}</code></pre>`);
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      const level = heading[1].length;
      blocks.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      continue;
    }
    const list = BULLET.test(line) ? ['ul', BULLET] : NUMBERED.test(line) ? ['ol', NUMBERED] : null;
    if (list) {
      flush();
      const [tag, pattern] = list;
      const items = [];
      for (; i < lines.length && pattern.test(lines[i]); i += 1) items.push(`<li>${inline(pattern.exec(lines[i])[1])}</li>`);
      i -= 1;
      blocks.push(`<${tag}>${items.join('')}</${tag}>`);
      continue;
    }
    if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i += 1) quoted.push(inline(QUOTE.exec(lines[i])[1]));
      i -= 1;
      blocks.push(`<blockquote><p>${quoted.join('<br>')}</p></blockquote>`);
      continue;
    }
    paragraph.push(line);
  }
  flush();
  return blocks.join('');
}
