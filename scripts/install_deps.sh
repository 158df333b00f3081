#!/usr/bin/env bash
# Installs the Debian packages nxrt needs to build and test, when they are missing.
# Run as root (or with sudo available); does nothing when everything is present.
set -euo pipefail
pkgs=(cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev libbenchmark-dev ccache
      python3-onnx python3-numpy libonnx-testdata pkg-config libre2-dev libpng-dev
      libjpeg62-turbo-dev libopenjp2-7-dev libwebp-dev libpcre2-dev libicu-dev
      python3-dev pybind11-dev python3-pytest
      libcpp-httplib-dev nlohmann-json3-dev  # nxrt serve: HTTP server and JSON (docs/SERVING.md)
      imagemagick fonts-dejavu-core espeak-ng)  # the last three: test images and speech for the examples
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null; then
  SUDO="sudo"
else
  echo "error: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
