#!/usr/bin/env bash
# Puts libfabric's headers and libraries (with the libraries its providers load) under
# .deps/libfabric, from Debian's packages, for machines whose image has no libfabric headers (the
# lent GPU machines: their builds report "libfabric OFF", and the emulated-node tests skip there).
# Run it where apt-get reaches the package archive (a developer's machine), then carry
# .deps/libfabric to the GPU machine: tools/gpu-check.sh builds with it (-DLIBFABRIC_ROOT) and puts
# .deps/libfabric/lib on LD_LIBRARY_PATH, where libmkccl's dlopen of libfabric.so.1 finds it.
#   tools/deps-libfabric.sh          -> .deps/libfabric/{include,lib}
set -euo pipefail
cd "$(dirname "$0")/.."
out=.deps/libfabric
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# libibverbs itself is left out: every GPU image has one, and a second copy would shadow it.
pkgs="libfabric1 libfabric-dev librdmacm1 ibverbs-providers libpsm-infinipath1 libpsm2-2 libnl-3-200
      libnl-route-3-200 libnuma1"
(cd "$tmp" && apt-get download $pkgs >/dev/null 2>&1) || { echo "deps-libfabric: apt-get download failed (run apt-get update first?)"; exit 1; }
for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/root"; done
rm -rf "$out"
mkdir -p "$out/lib"
cp -a "$tmp/root/usr/include" "$out/include"
for pat in 'libfabric.so*' 'librdmacm.so*' 'libefa.so*' 'libpsm2.so*' 'libinfinipath.so*' 'libnl-3.so*' \
           'libnl-route-3.so*' 'libnuma.so*'; do
  for dir in "$tmp/root/usr/lib/x86_64-linux-gnu" "$tmp/root/lib/x86_64-linux-gnu"; do
    [ -d "$dir" ] && find "$dir" -maxdepth 1 -name "$pat" -exec cp -a {} "$out/lib/" \;
  done
done
# libpsm-infinipath installs its library beside an alternatives link that dpkg -x does not make.
psm=$(find "$tmp/root/usr/lib" -name 'libpsm_infinipath.so.1*' -type f | head -1)
[ -n "$psm" ] && cp "$psm" "$out/lib/libpsm_infinipath.so.1"
missing=$(LD_LIBRARY_PATH="$out/lib" ldd "$out/lib/libfabric.so.1" | grep "not found" || true)
if [ -n "$missing" ]; then
  echo "deps-libfabric: libfabric.so.1 still misses:"; echo "$missing"; exit 1
fi
echo "deps-libfabric: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | wc -l) libraries)"
