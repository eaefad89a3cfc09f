# refit_add_module(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...] [NO_HEADERS])
# One library target per module folder, aliased refit::NAME, with headers under
# NAME/include/refit/NAME/ installed to include/refit/NAME/. NO_HEADERS: the folder's headers
# belong to another target that installs them (only when that target is built).
function(refit_add_module name)
  cmake_parse_arguments(ARG "NO_HEADERS" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(refit_${name} ${ARG_SOURCES})
  add_library(refit::${name} ALIAS refit_${name})
  set_target_properties(refit_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME refit_${name}
                                                 POSITION_INDEPENDENT_CODE ON)
  target_include_directories(refit_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(refit_${name} PUBLIC cxx_std_23)
  target_compile_options(refit_${name} PRIVATE ${REFIT_WARNINGS})
  target_link_libraries(refit_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  install(TARGETS refit_${name} EXPORT refitTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  if(NOT ARG_NO_HEADERS)
    install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
  set_property(GLOBAL APPEND PROPERTY REFIT_MODULES ${name})
endfunction()
