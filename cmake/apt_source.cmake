# plumb_apt_source(<package> <spec> <out-var>): the source tree of Debian's source package
# <package>, Debian's patches applied, fetched once into the build directory with `apt-get source
# <spec>` (<spec> is "<package>" for the suite's version or "<package>=<version>"; apt checks the
# archive's signature and the files' hashes). Sets <out-var> to the tree's directory. Needs a
# deb-src entry for Debian's archive and dpkg-dev (scripts/install-deps adds both).
set(plumb_deps ${CMAKE_BINARY_DIR}/_deps)
file(MAKE_DIRECTORY ${plumb_deps})

function(plumb_apt_source package spec out)
  string(MAKE_C_IDENTIFIER ${spec} id)
  set(tree ${plumb_deps}/${id}-src)
  if(NOT EXISTS ${tree}/CMakeLists.txt)
    message(STATUS "plumb: fetching Debian's ${spec} source (apt-get source)")
    set(work ${plumb_deps}/apt-source-${package})
    file(REMOVE_RECURSE ${work} ${tree})
    file(MAKE_DIRECTORY ${work})
    # Run as root into a directory apt's _apt user cannot write: told so, apt does not warn.
    execute_process(COMMAND apt-get source -qq -o APT::Sandbox::User=root ${spec} WORKING_DIRECTORY ${work}
                    RESULT_VARIABLE rc OUTPUT_QUIET)
    file(GLOB found LIST_DIRECTORIES true ${work}/${package}-*)
    list(FILTER found EXCLUDE REGEX "\\.(dsc|tar\\..*|asc)$")
    if(NOT rc EQUAL 0 OR NOT found)
      message(FATAL_ERROR "plumb: `apt-get source ${spec}` failed: it needs a deb-src entry for Debian's archive "
                          "and dpkg-dev (scripts/install-deps adds both)")
    endif()
    file(RENAME ${found} ${tree})
    file(REMOVE_RECURSE ${work})
  endif()
  set(${out} ${tree} PARENT_SCOPE)
endfunction()
