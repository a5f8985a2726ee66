# Warnings for project targets only (third-party headers are included as SYSTEM).
add_library(dynapar_warnings INTERFACE)
target_compile_options(dynapar_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
# CI's build (tools/bootstrap.sh test) turns them into errors: a warning does not land.
option(DYNAPAR_WERROR "Treat the project's own warnings as errors" OFF)
if(DYNAPAR_WERROR)
  target_compile_options(dynapar_warnings INTERFACE $<$<CXX_COMPILER_ID:GNU,Clang>:-Werror>)
endif()
