# celer_add_module(NAME
#   SOURCES  src/a.cpp ...        internals, listed explicitly
#   DEPS     public link deps     (other celer modules or imported targets)
#   PRIVATE_DEPS private link deps)
#
# Makes the library target celer_<NAME> with the alias celer::<NAME>; public headers live in
# <module>/include/celer/ and are included as <celer/...>; internals in <module>/src/.
function(celer_add_module name)
  cmake_parse_arguments(arg "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target celer_${name})
  add_library(${target} SHARED ${arg_SOURCES})
  add_library(celer::${name} ALIAS ${target})
  # Installed modules sit side by side in CMAKE_INSTALL_LIBDIR, so each finds the others
  # through its own directory.
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME celer_${name}
                                             POSITION_INDEPENDENT_CODE ON
                                             INSTALL_RPATH "$ORIGIN")
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${arg_DEPS} PRIVATE ${arg_PRIVATE_DEPS})
  # The public headers are C++20 (operator<=>, abbreviated templates), so every user of a
  # module compiles as C++20 at least, installed users included.
  target_compile_features(${target} PUBLIC cxx_std_20)
  celer_set_warnings(${target})
  install(TARGETS ${target} EXPORT celer-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # Inside a function, CMAKE_CURRENT_SOURCE_DIR is the calling module's directory (where a
  # bare "include/" would resolve too); spelled out so the reader need not know that rule.
  # The trailing slash installs the contents, giving <prefix>/include/celer/*.hpp.
  # A module may have no public headers.
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endfunction()

function(celer_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter
    -Wno-missing-field-initializers  # designated initialisers of options omit fields by design
    -Wno-restrict)                   # GCC 12 false positives inside libstdc++ string code (PR 105651)
  if(CELER_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
