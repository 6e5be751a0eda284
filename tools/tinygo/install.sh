#!/usr/bin/env bash
# Installs the TinyGo toolchain policies are built with into $1 (make tinygo
# passes .bin/tinygo): Debian's LLVM 19, wasi-libc and binaryen through
# apt-get, and TinyGo itself built from the Go module this folder's go.mod
# pins. Idempotent: when everything is in place it only checks and exits.
# README.md in this folder explains each step.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:?usage: install.sh DIR}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"

# Every Debian package the toolchain needs, with one file each ships that
# proves it is installed.
packages=(llvm-19-dev libclang-19-dev clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 binaryen)
proofs=(
  /usr/lib/llvm-19/lib/libLLVM.so
  /usr/lib/llvm-19/lib/libclangBasic.a
  /usr/bin/clang-19
  /usr/bin/wasm-ld-19
  /usr/lib/wasm32-wasi/libc.a
  /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a
  /usr/bin/wasm-opt
)

missing=()
for i in "${!packages[@]}"; do
  [ -e "${proofs[$i]}" ] || missing+=("${packages[$i]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tinygo: missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "tinygo: installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
  for i in "${!packages[@]}"; do
    [ -e "${proofs[$i]}" ] || { echo "tinygo: ${packages[$i]} installed but ${proofs[$i]} is missing" >&2; exit 1; }
  done
fi

# tools/tinygo is a module of its own, outside the repository's go.work:
# build it on its own go.mod.
export GOWORK=off
# TinyGo links LLVM through cgo (the Makefile turns cgo off for its own builds).
export CGO_ENABLED=1

# The stamp names what the installed toolchain was built from; a matching
# stamp with the binary and root present means there is nothing to do.
stamp="$(cat "$here/go.mod" "$here/go.sum" "$0" | sha256sum | cut -c1-16) $(go env GOVERSION)"
if [ -x "$dest/bin/tinygo" ] && [ -f "$dest/src/net/net.go" ] && [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi

start=$(date +%s)
echo "tinygo: building $(grep -o 'tinygo-org/tinygo v[^ ]*' "$here/go.mod" | head -1) against LLVM 19 into $dest"
rm -rf "$dest/bin" "$dest/src" "$dest/targets" "$dest/lib" "$dest/.stamp"
mkdir -p "$dest/bin"
(cd "$here" && go build -tags=llvm19 -o "$dest/bin/tinygo.partial" github.com/tinygo-org/tinygo)

# TINYGOROOT: TinyGo finds it as the parent of its binary's folder. It must
# be writable and hold src/net, a git submodule the module zip lacks; the
# policies never use the network, so an empty package stands in.
mod="$(cd "$here" && go list -m -f '{{.Dir}}' github.com/tinygo-org/tinygo)"
cp -R "$mod/src" "$mod/targets" "$mod/lib" "$dest/"
chmod -R u+w "$dest/src" "$dest/targets" "$dest/lib"
mkdir -p "$dest/src/net"
printf '// Package net is empty: see tools/tinygo/README.md.\npackage net\n' >"$dest/src/net/net.go"

mv "$dest/bin/tinygo.partial" "$dest/bin/tinygo"
echo "$stamp" >"$dest/.stamp"
echo "tinygo: installed in $(($(date +%s) - start)) s: $("$dest/bin/tinygo" version)"
