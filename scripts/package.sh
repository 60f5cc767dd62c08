#!/usr/bin/env bash
# Builds coffer's .deb and .rpm with nfpm (pinned, built into .cache/bin)
# from the release build of scripts/build.sh: the binary, the systemd
# units, sysusers.d and tmpfiles.d files, the example configuration and
# worker settings of deploy/packaging/, shell completions (coffer
# completion bash|zsh|fish) and man pages (coffer generate man, when the
# binary has it). scripts/ci/check-packages.sh checks what it makes.
#
#   scripts/package.sh            # into dist/
#   scripts/package.sh OUT        # into OUT/
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
bin="$PWD/.cache/bin"
v=v2.48.0
if ! [ -x "$bin/nfpm" ] || ! [ -e "$bin/.nfpm-$v" ]; then
  mkdir -p "$bin"
  GOBIN="$bin" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$v"
  touch "$bin/.nfpm-$v"
fi
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
bash scripts/build.sh "$STAGE/coffer"
coffer="$STAGE/coffer"
# Debian ships binaries without their symbol table and debugging
# information (lintian: unstripped-binary-or-object); stripping is
# deterministic, so the packaged binary is as reproducible as the build.
strip --strip-unneeded "$coffer"
# "coffer v0.1.0-3-g1a2b3c4d5e6f (compression: ...)"
VERSION=$("$coffer" --version | awk '{print $2}')

mkdir -p "$STAGE/completions"
"$coffer" completion bash >"$STAGE/completions/coffer.bash"
"$coffer" completion zsh >"$STAGE/completions/_coffer"
"$coffer" completion fish >"$STAGE/completions/coffer.fish"

# The glibc the binary was linked against (cgo's zstd): the .deb needs at
# least that version.
glibc=$( (objdump -T "$coffer" 2>/dev/null || true) | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
LIBC_DEPENDS="libc6${glibc:+ (>= $glibc)}"

# Debian wants a changelog of the package; coffer's own is CHANGELOG.md.
date=$(date -u -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
printf 'coffer (%s) unstable; urgency=medium\n\n  * coffer %s: its changes are in CHANGELOG.md.\n\n -- coffer developers <coffer@users.noreply.github.com>  %s\n' \
  "${VERSION#v}" "$VERSION" "$date" | gzip -9n >"$STAGE/changelog.Debian.gz"

# nfpm expands variables in a few fields only: the configuration is
# written out with them.
config="$STAGE/nfpm.yaml"
sed -e "s|\${STAGE}|$STAGE|g" -e "s|\${VERSION}|$VERSION|g" -e "s|\${LIBC_DEPENDS}|$LIBC_DEPENDS|g" \
  deploy/packaging/nfpm.yaml >"$config"
# Man pages come from `coffer generate man --dir DIR` (one page per
# command, coffer.yaml(5)); a binary without it gets a package without
# them.
if "$coffer" generate man --help 2>/dev/null | grep -q -- '--dir'; then
  "$coffer" generate man --dir "$STAGE/man-raw" >/dev/null
  n=0
  while IFS= read -r -d '' page; do
    name=$(basename "$page")
    section=${name##*.}
    mkdir -p "$STAGE/man/man$section"
    gzip -9n <"$page" >"$STAGE/man/man$section/$name.gz"
    n=$((n + 1))
  done < <(find "$STAGE/man-raw" -type f -name '*.[1-9]' -print0)
  printf '  - src: %s/man\n    dst: /usr/share/man\n    type: tree\n' "$STAGE" >>"$config"
  echo "package: $n man pages"
else
  echo "package: this coffer has no 'coffer generate man --dir': the packages hold no man pages"
fi

mkdir -p "$out"
for packager in deb rpm; do
  "$bin/nfpm" package --config "$config" --packager "$packager" --target "$out/" | sed 's/^/package: /'
done
