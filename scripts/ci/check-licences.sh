#!/usr/bin/env bash
# coffer is under the Apache License 2.0 (LICENSE; the README says why).
# Every dependency that ends up in the binary or the console must be under
# a licence that allows it: Go modules checked by go-licenses (pinned,
# built into .cache/bin), npm packages by their package-lock entries.
set -euo pipefail
cd "$(dirname "$0")/../.."
allowed=Apache-2.0,BSD-2-Clause,BSD-3-Clause,MIT,ISC,MPL-2.0,CC0-1.0,Unlicense,0BSD
bin="$PWD/.cache/bin"
v=v1.6.0
if ! [ -x "$bin/go-licenses" ] || ! [ -e "$bin/.go-licenses-$v" ]; then
  mkdir -p "$bin"
  GOBIN="$bin" go install "github.com/google/go-licenses@$v"
  touch "$bin/.go-licenses-$v"
fi
# modernc.org/mathutil's LICENSE is the BSD 3-clause text under a heading
# the classifier does not recognise (read by hand; it names no other terms).
"$bin/go-licenses" check ./cmd/coffer --allowed_licenses="$allowed" \
  --ignore modernc.org/mathutil 2> >(grep -v "contains non-Go code" | grep -v '^/' >&2)
# npm: the lock records each package's licence; htmx-ext-sse's package.json
# names none, its LICENSE file is the BSD Zero Clause licence.
node - "$allowed" <<'JS'
const allowed = new Set(process.argv[2].split(","));
const known = { "node_modules/htmx-ext-sse": "0BSD" };
const lock = require(process.cwd() + "/web/package-lock.json");
let bad = 0;
for (const [path, p] of Object.entries(lock.packages)) {
  if (path === "") continue;
  const licence = p.license || known[path];
  if (!allowed.has(licence)) { console.error(`check-licences: ${path} ${p.version} is under ${licence || "no stated licence"}`); bad++; }
}
process.exit(bad ? 1 : 0);
JS
echo "licences: every Go module and npm package is under one of $allowed"
