// Build the viewer into ../app/viewer_dist (served by the worker at /ui/; app/shell/http/viewer.py).
// One esbuild bundle, no CDN, no web fonts: everything the page loads comes from the worker.
// `npm run build` (or `make viewer`, which runs `npm ci` first).
import { build } from 'esbuild';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'app', 'viewer_dist');

await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'assets'), { recursive: true });
await build({
  entryPoints: [join(here, 'src', 'viewer.js'), join(here, 'src', 'viewer.css')],
  outdir: join(out, 'assets'),
  entryNames: '[name]',
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  minify: true,
  sourcemap: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
await copyFile(join(here, 'index.html'), join(out, 'index.html'));
await copyFile(join(here, 'src', 'favicon.svg'), join(out, 'assets', 'favicon.svg'));
// The marker the worker checks (and `make` uses as the build stamp).
await writeFile(join(out, 'BUILT'), 'built by viewer/build.mjs\n');
console.log(`viewer built into ${out}`);
