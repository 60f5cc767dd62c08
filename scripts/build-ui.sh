#!/usr/bin/env bash
# Builds the web console's third-party files: installs the npm packages
# pinned in web/package-lock.json (npm ci: exactly those versions, checked
# against their recorded hashes) and copies the few files the console
# serves into internal/console/static/vendor, which go:embed puts in the
# binary. Without them `go build ./cmd/coffer` still works and /ui/ says
# to run this script. Needs Node.js and npm (installed from Debian when
# missing).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null; then
	if command -v apt-get >/dev/null; then
		SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
		$SUDO apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
	else
		echo "build-ui.sh: npm is missing: install Node.js >= 18 with npm" >&2
		exit 1
	fi
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
