# Sourced by tools/gpu/build.sh and check.sh: the unpacked kit's programs and libraries.
export PREFIX=${PREFIX:-/tmp/dynapar-prefix}
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig
