#!/usr/bin/env bash
# What the web console's browser tests need: Debian's Chromium (never a
# browser downloaded by a test tool) for chromedp, npm for the console's
# pinned front-end packages, and the console's files built
# (scripts/build-ui.sh), so that the coffer the tests build embeds them.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
bash scripts/build-ui.sh
