# Shared compile flags and helpers for kvrt's components.

add_library(kvrt_flags INTERFACE)
# Warnings-as-errors apply to kvrt's own build, not to projects that link kvrt.
target_compile_options(kvrt_flags INTERFACE
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror
                                             -Wno-missing-field-initializers>>
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings --expt-relaxed-constexpr
                                              -Xcompiler=-Wall,-Wextra,-Werror>>)
target_include_directories(kvrt_flags INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
  $<INSTALL_INTERFACE:include>)
if(KVRT_CUDA)
  target_compile_definitions(kvrt_flags INTERFACE KVRT_WITH_CUDA=1)
endif()
if(KVRT_SANITIZE)
  # GCC's maybe-uninitialized analysis misfires on the instrumented code (a Result's
  # variant read through ASan's shadow); the sanitizers check real uses at run time.
  target_compile_options(kvrt_flags INTERFACE
    $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined
                      -fno-sanitize-recover=all -fno-omit-frame-pointer
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>>>)
  target_link_options(kvrt_flags INTERFACE $<BUILD_INTERFACE:-fsanitize=address,undefined>)
endif()
if(KVRT_TSAN)
  if(KVRT_SANITIZE)
    message(FATAL_ERROR "KVRT_TSAN and KVRT_SANITIZE cannot be combined")
  endif()
  target_compile_options(kvrt_flags INTERFACE
    $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>>)
  target_link_options(kvrt_flags INTERFACE $<BUILD_INTERFACE:-fsanitize=thread>)
endif()
# Binaries must run on a machine with a different distribution: carry libstdc++/libgcc.
if(NOT KVRT_SANITIZE AND NOT KVRT_TSAN)
  target_link_options(kvrt_flags INTERFACE $<BUILD_INTERFACE:-static-libstdc++ -static-libgcc>)
endif()
install(TARGETS kvrt_flags EXPORT kvrtTargets)

# kvrt_add_library(NAME SOURCES ... [DEPS ...])
function(kvrt_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC kvrt_flags ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY KVRT_LIBRARIES ${name})
endfunction()

# kvrt_add_test(NAME SOURCES ... [DEPS ...] [GPU]) — GPU tests carry the ctest label
# `gpu` and must skip (GTEST_SKIP) when no device is present.
function(kvrt_add_test name)
  if(NOT KVRT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "GPU" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE kvrt_flags ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    KVRT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(ARG_GPU)
    set(labels gpu)
  else()
    set(labels cpu)
  endif()
  include(GoogleTest)
  # Parameterized suites name their cases, so the test names stay without gtest's byte
  # dump of the parameter (NO_PRETTY_VALUES keeps the name, drops the dump).
  gtest_discover_tests(${name} PROPERTIES LABELS "${labels}" DISCOVERY_TIMEOUT 60
                       NO_PRETTY_VALUES)
endfunction()
