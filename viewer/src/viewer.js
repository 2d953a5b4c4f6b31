// The a2ui-stream live surface viewer (issue 9; docs/viewer.md). Bundled by build.mjs into
// app/viewer_dist/ and served by the worker at /ui/. Everything it loads comes from the worker.
import './ui/app.js';
