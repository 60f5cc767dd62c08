#!/usr/bin/env bash
# Reproducible builds: two clones of HEAD in different directories, built
# by scripts/build.sh, must give the same bytes. Prints SHA256SUMS (what a
# release publishes beside its binaries) and fails if the sums differ.
# Built from clones, so only committed files count; the console's files
# (gitignored, built by scripts/build-ui.sh from pinned npm packages) are
# copied into both.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for d in a b/deeper; do
  git clone -q . "$work/$d"
  if [ -d internal/console/static/vendor ]; then
    cp -r internal/console/static/vendor "$work/$d/internal/console/static/"
  fi
  (cd "$work/$d" && bash scripts/build.sh coffer >/dev/null)
done
(cd "$work/a" && sha256sum coffer) > "$work/SHA256SUMS"
(cd "$work/b/deeper" && sha256sum --quiet -c "$work/SHA256SUMS") || {
  echo "check-reproducible: two builds of $(git rev-parse HEAD) differ" >&2
  exit 1
}
echo "reproducible: $(cat "$work/SHA256SUMS")"
