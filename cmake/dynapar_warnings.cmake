# Warnings for project targets only (third-party headers are included as SYSTEM).
add_library(dynapar_warnings INTERFACE)
target_compile_options(dynapar_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
