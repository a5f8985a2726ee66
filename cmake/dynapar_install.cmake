# `cmake --install build --prefix P`: the libraries behind examples/actor_api.cpp, the public
# headers only (include/dynapar -> P/include/dynapar: "actors/api.hpp", "model/api.hpp"; the
# internal ones in runtime/ and actors/ are not installed) and a package config, so that code
# outside this tree builds with find_package(dynapar) and links dynapar::actors (tests/install).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(_dynapar_libs dynapar_common dynapar_planner dynapar_schedule dynapar_sim dynapar_control dynapar_step dynapar_comm dynapar_data
    dynapar_wire dynapar_config dynapar_logging dynapar_model dynapar_training dynapar_actors dynapar_remote dynapar_warnings)
foreach(_lib ${_dynapar_libs})
  string(REPLACE "dynapar_" "" _name ${_lib})
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_name})
endforeach()
set(_dir ${CMAKE_INSTALL_LIBDIR}/cmake/dynapar)
install(TARGETS ${_dynapar_libs} EXPORT dynaparTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dynapar)
install(DIRECTORY include/dynapar/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dynapar FILES_MATCHING PATTERN "*.hpp")
install(EXPORT dynaparTargets NAMESPACE dynapar:: DESTINATION ${_dir})
configure_package_config_file(cmake/dynaparConfig.cmake.in ${CMAKE_BINARY_DIR}/dynaparConfig.cmake INSTALL_DESTINATION ${_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dynaparConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dynaparConfig.cmake ${CMAKE_BINARY_DIR}/dynaparConfigVersion.cmake cmake/FindCAF.cmake cmake/FindNCCL.cmake
        DESTINATION ${_dir})
