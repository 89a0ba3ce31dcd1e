#!/usr/bin/env bash
# Rebuild workbench/interfaces/dashboard/assets/plotly-workbench.min.js: plotly.js's core (scatter and the components:
# axes, legend, annotations, shapes, colorbar, modebar, ...) with the bar and heatmap traces, the only trace types the
# dashboard draws (style.TRACE_TYPES), built with plotly.js's own esbuild settings (its esbuild-config.js). Left out
# against plotly.js's cartesian bundle: the other cartesian traces and the world-calendars component (non-Gregorian
# date axes), which made the page's plotly.js run twice as long; its first line is a V8 compile hint. Needs node and
# npm (the npm registry). MIT.
#   bash scripts/build_plotly.sh [VERSION]   # default: the plotly.js that plotly.py bundles
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-$(python3 -c 'import plotly.offline as o; print(o.get_plotlyjs_version())')}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "plotly.js@$version" >/dev/null
tar xzf "plotly.js-$version.tgz"
cd package
npm install --silent --omit=dev --ignore-scripts --no-audit --no-fund
npm install --silent --no-save --ignore-scripts --no-audit --no-fund esbuild@0.28 esbuild-plugin-environment@0.5 \
    esbuild-plugin-glsl@1.4 esbuild-plugin-inline-css@0.0.1
cat > lib/index-workbench.js <<'JS'
'use strict';
var Plotly = require('./core');
Plotly.register([require('./bar'), require('./heatmap')]);
module.exports = Plotly;
JS
cat > build-workbench.js <<'JS'
const { build } = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const version = require('./package.json').version;
// the first line asks V8 to compile every function while the file streams in, off the page's main thread (explicit
// compile hints): the page runs most of plotly.js to draw its first figure, which lazy compiling would do on the
// main thread (about 0.1 s)
const header = `//# allFunctionsCalledOnLoad
/**
* plotly.js (workbench: scatter, bar, heatmap - minified) v${version}
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/
(
 function(root, factory) {
  if (typeof module === "object" && module.exports) {
   module.exports = factory();
  } else {
   root.moduleName = factory();
  }
} (typeof self !== "undefined" ? self : this, () => {`;
build({
    entryPoints: ['./lib/index-workbench.js'], outfile: process.argv[2],
    format: 'iife', globalName: 'Plotly', bundle: true, minify: true, sourcemap: false,
    plugins: [InlineCSSPlugin(), glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' }, target: 'es2016', logLevel: 'warning',
    banner: { js: header }, footer: { js: '\nwindow.Plotly = Plotly;\nreturn Plotly;\n}));' },
}).catch(() => process.exit(1));
JS
node build-workbench.js "$repo/workbench/interfaces/dashboard/assets/plotly-workbench.min.js"
echo "built plotly.js $version: $(wc -c < "$repo/workbench/interfaces/dashboard/assets/plotly-workbench.min.js") bytes"
