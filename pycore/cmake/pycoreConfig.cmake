# pycore's CMake package: find_package(pycore CONFIG) gives pycore_add_bpf_object()
# (PycoreBpf.cmake). Under scikit-build-core it is found as it is (site-packages
# is on CMAKE_PREFIX_PATH); elsewhere ask the interpreter that has pycore:
#
#   find_package(Python COMPONENTS Interpreter REQUIRED)
#   execute_process(COMMAND "${Python_EXECUTABLE}" -m pycore cmake-dir
#                   OUTPUT_VARIABLE pycore_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
#   find_package(pycore CONFIG REQUIRED)
#
# Sets pycore_VERSION.
include("${CMAKE_CURRENT_LIST_DIR}/pycoreConfigVersion.cmake")
set(pycore_VERSION "${PACKAGE_VERSION}")
include("${CMAKE_CURRENT_LIST_DIR}/PycoreBpf.cmake")
set(pycore_FOUND TRUE)
