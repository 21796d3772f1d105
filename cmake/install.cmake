# What `cmake --install` puts in place, and the .deb CPack makes of it:
#   bin/collcheck, <libdir>/libcollcheck-mpi.so (the PMPI interposer of
#   `collcheck run`), include/collcheck/plugin.h, and a CMake package config
#   so that a plugin author writes find_package(collcheck) and links
#   collcheck::plugin (tests/install_test.sh builds examples/plugin so).
include(CMakePackageConfigHelpers)

add_library(collcheck_plugin_interface INTERFACE)
target_include_directories(collcheck_plugin_interface INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/harness/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(collcheck_plugin_interface PROPERTIES EXPORT_NAME plugin)
add_library(collcheck::plugin ALIAS collcheck_plugin_interface)

# The installed files keep the run paths of the libraries they were linked
# with (CUDA's, Open MPI's), and are built with them: nothing of collcheck's
# own is a shared library in the build tree, so there is nothing to rewrite.
set_target_properties(collcheck collcheck-mpi PROPERTIES BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS collcheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS collcheck-mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/harness/include/collcheck/plugin.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/collcheck)
install(TARGETS collcheck_plugin_interface EXPORT collcheckTargets)
install(EXPORT collcheckTargets NAMESPACE collcheck:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collcheck)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/collcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/collcheckConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collcheck
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/collcheckConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/collcheckConfig.cmake ${PROJECT_BINARY_DIR}/collcheckConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collcheck)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/mpi DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# cpack -G DEB in the build tree: collcheck_<version>_<arch>.deb. The
# dependencies are Debian 12's packages of the libraries collcheck links
# (ldd, dpkg -S); CUDA and NCCL come from NVIDIA's installer, not Debian, and
# are not named: a build with the NCCL peer needs them in the loader's path.
set(CPACK_PACKAGE_NAME collcheck)
set(CPACK_PACKAGE_VENDOR "collcheck")
set(CPACK_PACKAGE_CONTACT "collcheck maintainers <collcheck@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "verification and fault-injection harness for All-Reduce, with a PMPI interposer")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libopenmpi3, openmpi-bin, libgloo0, libboost-context1.74.0, libprometheus-cpp-core1.0, libprometheus-cpp-pull1.0, libcurl4, libfmt9, libyaml-cpp0.7, libstdc++6 (>= 12), binutils")
include(CPack)
