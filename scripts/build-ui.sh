#!/usr/bin/env bash
# Builds the web console's third-party files: installs the npm packages
# pinned in web/package-lock.json (npm ci: exactly those versions, checked
# against their recorded hashes) and copies the few files the console
# serves into internal/console/static/vendor, which go:embed puts in the
# binary. Without them `go build ./cmd/coffer` still works and /ui/ says
# to run this script. Needs Node.js and npm (Debian: apt-get install npm).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null; then
	echo "build-ui.sh: npm is missing: apt-get install -y npm (or Node.js >= 18 with npm)" >&2
	exit 1
fi
(cd web && npm ci --no-audit --no-fund --loglevel=error)
out=internal/console/static/vendor
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
cp web/node_modules/htmx.org/dist/htmx.min.js "$out.tmp/"
cp web/node_modules/htmx-ext-sse/dist/sse.min.js "$out.tmp/"
cp web/node_modules/@picocss/pico/css/pico.min.css "$out.tmp/"
for pkg in htmx.org htmx-ext-sse @picocss/pico; do
	cp "web/node_modules/$pkg/LICENSE"* "$out.tmp/LICENSE.$(basename "$pkg")" 2>/dev/null || true
done
rm -rf "$out"
mv "$out.tmp" "$out"
echo "build-ui.sh: the console's files are in $out (rebuild coffer to embed them)"
