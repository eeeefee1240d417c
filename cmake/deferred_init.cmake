# Static initialisers a CNI invocation does not need (cni-entry/deferred_init.hpp): every exec'd
# plumb would otherwise run them at its start (and fault in their code and data), for code only
# the command line, the metrics server or a pod with device resources reaches.
#
# plumb_defer_initialisers(<input> <output> [DEPENDS <target>...]): <output> is a copy of <input>
# (an object file or a static archive, whose members are each treated so) with its .init_array
# sections, those with a priority included, renamed to plumb_deferred_init, which the C library
# does not run at start; plumb::deferred_init::run() runs it before that code's first use. Inputs
# compiled by this project must be built without link-time optimisation (objcopy needs machine
# code in the object).
function(plumb_defer_initialisers input output)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "DEPENDS")
  get_filename_component(name ${output} NAME)
  set(renames "")
  foreach(section .init_array .init_array.00101 .init_array.00102)  # protobuf's priorities 101, 102
    list(APPEND renames --rename-section ${section}=plumb_deferred_init)
  endforeach()
  add_custom_command(OUTPUT ${output} COMMAND ${CMAKE_OBJCOPY} ${renames} ${input} ${output}
                     DEPENDS ${input} ${arg_DEPENDS} COMMENT "${name}: static initialisers deferred" VERBATIM)
endfunction()
