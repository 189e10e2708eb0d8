# PycoreBpf.cmake - pycore_add_bpf_object(): BPF C into a CO-RE object (and a
# typed Python skeleton) in a CMake build, the way pycore builds its own.
#
# Shipped in the pycore package (pycore/cmake/). Find it with
#   find_package(pycore CONFIG REQUIRED)
# (scikit-build-core puts site-packages on CMAKE_PREFIX_PATH, where this
# directory is site-packages/pycore/cmake), or anywhere with the directory
# `python -m pycore cmake-dir` prints (see pycoreConfig.cmake).
#
#   pycore_add_bpf_object(NAME
#       SOURCES file.bpf.c...          BPF C; several are linked into one object (bpftool)
#       [INCLUDE_DIRS dir...]          searched first (a vmlinux.h there wins)
#       [DEFINES NAME[=VALUE]...]
#       [ARCH arch]                    __TARGET_ARCH_<arch>: x86, arm64, ... (default:
#                                      PYCORE_BPF_ARCH, else this machine's)
#       [BTF file | VMLINUX_H file]    the kernel types: vmlinux.h written from this BTF, or
#                                      this header (default: from /sys/kernel/btf/vmlinux)
#       [KEEP_DEBUG]                   keep the DWARF (no llvm-strip -g)
#       [SKELETON [SKELETON_ARGS arg...]]  also NAME_skel.py and NAME_skel.pyi (pycore skel)
#       [OUTPUT_DIR dir]               default: CMAKE_CURRENT_BINARY_DIR
#       [INSTALL_DIR dir])             install the object (and skeleton) there; under
#                                      scikit-build-core, relative to the wheel's root:
#                                      give the package's directory (mypkg)
#
# OUTPUT_DIR/NAME.bpf.o is built by `python -m pycore build` (the compile is
# defined once, in pycore/build/compile.py; its header dependencies come back
# as a depfile), in the target NAME_bpf, part of ALL. NAME_BPF_OBJECT (and
# NAME_SKELETON) are set in the caller's scope. At configure time the
# toolchain is checked once (`pycore build --check`), so a missing clang or
# libbpf-dev fails the configure with one line saying what to install.
#
# Variables:
#   PYCORE_PYTHON       the interpreter that runs pycore (default: Python_EXECUTABLE,
#                       Python3_EXECUTABLE, else find_package(Python3))
#   PYCORE_BPF_ARCH     default ARCH (cache)
#   PYCORE_BPF_CLANG    the clang to run (cache; default: the first clang on PATH)
#   PYCORE_SOURCE_DIR   run pycore from this source tree (python -m pycore in that
#                       directory: pycore's own build; not PYTHONPATH, which pip's
#                       build isolation filters)

include_guard(GLOBAL)
cmake_minimum_required(VERSION 3.15)

if(POLICY CMP0116)  # depfiles as written, absolute paths, for Ninja too
  cmake_policy(SET CMP0116 NEW)
endif()

set(PYCORE_BPF_ARCH "" CACHE STRING "__TARGET_ARCH_<arch> for BPF objects (empty: this machine's)")
set(PYCORE_BPF_CLANG "" CACHE FILEPATH "clang for BPF objects (empty: the first clang on PATH)")

function(_pycore_python out)
  if(PYCORE_PYTHON)
    set(py "${PYCORE_PYTHON}")
  elseif(Python_EXECUTABLE)
    set(py "${Python_EXECUTABLE}")
  elseif(Python3_EXECUTABLE)
    set(py "${Python3_EXECUTABLE}")
  else()
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
    set(py "${Python3_EXECUTABLE}")
  endif()
  set(${out} "${py}" PARENT_SCOPE)
endfunction()

function(pycore_add_bpf_object NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "SKELETON;KEEP_DEBUG"
                        "ARCH;BTF;VMLINUX_H;OUTPUT_DIR;INSTALL_DIR"
                        "SOURCES;INCLUDE_DIRS;DEFINES;SKELETON_ARGS")
  set(where "pycore_add_bpf_object(${NAME})")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${where}: NAME must be a C/Python identifier (it names NAME.bpf.o and NAME_skel.py)")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "${where}: SOURCES is required")
  endif()
  if(ARG_BTF AND ARG_VMLINUX_H)
    message(FATAL_ERROR "${where}: give BTF or VMLINUX_H, not both")
  endif()
  if(ARG_SKELETON_ARGS AND NOT ARG_SKELETON)
    message(FATAL_ERROR "${where}: SKELETON_ARGS without SKELETON")
  endif()
  if(TARGET ${NAME}_bpf)
    message(FATAL_ERROR "${where}: a BPF object named ${NAME} was added already")
  endif()

  _pycore_python(pycore)
  set(cwd "${CMAKE_CURRENT_BINARY_DIR}")
  if(PYCORE_SOURCE_DIR)
    set(cwd "${PYCORE_SOURCE_DIR}")
  endif()
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}")
  if(ARG_OUTPUT_DIR)
    get_filename_component(out_dir "${ARG_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  set(obj "${out_dir}/${NAME}.bpf.o")

  set(sources)
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND sources "${src}")
  endforeach()
  set(opts)
  foreach(dir IN LISTS ARG_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND opts -I "${dir}")
  endforeach()
  foreach(def IN LISTS ARG_DEFINES)
    list(APPEND opts -D "${def}")
  endforeach()
  set(arch "${ARG_ARCH}")
  if(NOT arch)
    set(arch "${PYCORE_BPF_ARCH}")
  endif()
  if(arch)
    list(APPEND opts --arch "${arch}")
  endif()
  set(extra_deps)
  if(ARG_BTF)
    get_filename_component(btf "${ARG_BTF}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND opts --btf "${btf}")
    list(APPEND extra_deps "${btf}")
  elseif(ARG_VMLINUX_H)
    get_filename_component(vmlinux "${ARG_VMLINUX_H}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND opts --vmlinux-h "${vmlinux}")
    list(APPEND extra_deps "${vmlinux}")
  endif()
  if(ARG_KEEP_DEBUG)
    list(APPEND opts --keep-debug)
  endif()
  if(PYCORE_BPF_CLANG)
    list(APPEND opts --clang "${PYCORE_BPF_CLANG}")
  endif()

  # Configure-time check, once per distinct toolchain: one line on what is missing.
  string(SHA1 key "${pycore};${cwd};${opts}")
  get_property(checked GLOBAL PROPERTY _PYCORE_BPF_CHECKED)
  if(NOT key IN_LIST checked)
    execute_process(COMMAND "${pycore}" -m pycore build --check ${opts}
                    WORKING_DIRECTORY "${cwd}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE found ERROR_VARIABLE why
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      if(why MATCHES "No module named pycore")
        set(why "pycore is not installed for ${pycore}: add it to build-system.requires (pyproject.toml)")
      endif()
      string(REGEX REPLACE "^pycore: error: " "" why "${why}")
      message(FATAL_ERROR "${where}: ${why}")
    endif()
    string(REPLACE "\n" "\n   " found "${found}")
    message(STATUS "pycore build toolchain:\n   ${found}")
    set_property(GLOBAL APPEND PROPERTY _PYCORE_BPF_CHECKED "${key}")
  endif()

  set(depfile_args)
  if(CMAKE_GENERATOR MATCHES "Ninja" OR NOT CMAKE_VERSION VERSION_LESS 3.20)
    set(depfile "${out_dir}/${NAME}.bpf.d")
    list(APPEND opts --depfile "${depfile}")
    set(depfile_args DEPFILE "${depfile}")
  endif()

  add_custom_command(
    OUTPUT "${obj}"
    COMMAND "${pycore}" -m pycore build ${sources} -o "${obj}" ${opts}
    DEPENDS ${sources} ${extra_deps}
    WORKING_DIRECTORY "${cwd}"
    ${depfile_args}
    COMMENT "BPF ${NAME}.bpf.o"
    VERBATIM)
  set(outputs "${obj}")
  set(${NAME}_BPF_OBJECT "${obj}" PARENT_SCOPE)

  if(ARG_SKELETON)
    set(skel "${out_dir}/${NAME}_skel.py")
    add_custom_command(
      OUTPUT "${skel}" "${out_dir}/${NAME}_skel.pyi"
      COMMAND "${pycore}" -m pycore skel "${obj}" -o "${skel}" ${ARG_SKELETON_ARGS}
      DEPENDS "${obj}"
      WORKING_DIRECTORY "${cwd}"
      COMMENT "BPF skeleton ${NAME}_skel.py"
      VERBATIM)
    list(APPEND outputs "${skel}" "${out_dir}/${NAME}_skel.pyi")
    set(${NAME}_SKELETON "${skel}" PARENT_SCOPE)
  endif()

  add_custom_target(${NAME}_bpf ALL DEPENDS ${outputs})
  if(ARG_INSTALL_DIR)
    install(FILES ${outputs} DESTINATION "${ARG_INSTALL_DIR}")
  endif()
endfunction()
