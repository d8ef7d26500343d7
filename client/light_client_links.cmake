# light_client_links.cmake — keeps the client light: placementctl, placement_load and the client libraries
# must link no placement algorithm and no libmetis (issue 16: the client used to link every algorithm
# only to read an algorithm's name for the routing header).
#
# Two halves, so that the check can neither miss an unused-but-linked library nor a library linked under a
# new name:
#   - at configure time, placement_record_link_closures() writes every listed target's whole link closure
#     (direct and transitive, through $<LINK_ONLY:...>) to a file;
#   - at test time (cmake -P this file), the closures are searched for the algorithm libraries and
#     libmetis, and the built binaries for libmetis among their NEEDED entries (readelf -d) and for
#     algorithm code in their symbol tables (nm -C).

# Link-closure entries that must not appear: the algorithm libraries (engine/solve's registry and every
# folder of partitioners) and libmetis, by target name or library path.
set(PLACEMENT_ALGORITHM_LIBRARY_REGEX
  "^placement_(solve|portfolio|pardnn|baselines|repair|partition)$|metis")
# Symbols of algorithm code: any partitioner's Partition method, their factories, the registry, METIS.
set(PLACEMENT_ALGORITHM_SYMBOL_REGEX
  "Partitioner::Partition\\(|Make[A-Za-z]*Partitioner\\(|FindAlgorithm\\(|AllAlgorithms\\(|METIS_")

if(NOT CMAKE_SCRIPT_MODE_FILE)
  # Every entry reachable from `target` through LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES.
  function(placement_link_closure target out_var)
    set(seen "")
    set(queue "${target}")
    while(queue)
      list(POP_FRONT queue item)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
      if(item STREQUAL "" OR item IN_LIST seen)
        continue()
      endif()
      list(APPEND seen "${item}")
      if(NOT TARGET "${item}")
        continue()
      endif()
      get_target_property(aliased "${item}" ALIASED_TARGET)
      if(aliased)
        list(APPEND queue "${aliased}")
        continue()
      endif()
      get_target_property(type "${item}" TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(direct "${item}" LINK_LIBRARIES)
        if(direct)
          list(APPEND queue ${direct})
        endif()
      endif()
      get_target_property(interface "${item}" INTERFACE_LINK_LIBRARIES)
      if(interface)
        list(APPEND queue ${interface})
      endif()
    endwhile()
    set(${out_var} "${seen}" PARENT_SCOPE)
  endfunction()

  # Writes one line "target entry" per entry of each target's closure to `file`. Call it when every
  # target is defined (deferred to the end of the top-level directory).
  function(placement_record_link_closures file)
    set(text "")
    foreach(target IN LISTS ARGN)
      placement_link_closure(${target} closure)
      foreach(entry IN LISTS closure)
        string(APPEND text "${target} ${entry}\n")
      endforeach()
    endforeach()
    file(WRITE "${file}" "${text}")
  endfunction()
  return()
endif()

# ---- Test mode: cmake -DCLOSURES=FILE -DTARGETS=a,b -DBINARIES=x,y -DREADELF=... -DNM=... -P this file
# (lists comma-separated: a ';' would not survive the test command line)
string(REPLACE "," ";" TARGETS "${TARGETS}")
string(REPLACE "," ";" BINARIES "${BINARIES}")
set(problems "")
file(STRINGS "${CLOSURES}" lines)
foreach(target IN LISTS TARGETS)
  set(entries 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ ]+) (.*)$" AND CMAKE_MATCH_1 STREQUAL target)
      set(entry "${CMAKE_MATCH_2}")
      math(EXPR entries "${entries} + 1")
      if(entry MATCHES "${PLACEMENT_ALGORITHM_LIBRARY_REGEX}")
        string(APPEND problems "${target} links ${entry}\n")
      endif()
    endif()
  endforeach()
  # The target itself is the first entry; fewer would mean its closure was never recorded.
  if(entries LESS 2)
    message(FATAL_ERROR "no link closure of ${target} in ${CLOSURES}")
  endif()
  message(STATUS "${target}: ${entries} entries in its link closure checked")
endforeach()

foreach(binary IN LISTS BINARIES)
  execute_process(COMMAND "${READELF}" -d "${binary}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE failed)
  if(failed OR NOT dynamic MATCHES "NEEDED")
    message(FATAL_ERROR "readelf -d ${binary} failed or shows no NEEDED entries")
  endif()
  if(dynamic MATCHES "NEEDED[^\n]*metis")
    string(APPEND problems "${binary} needs libmetis\n")
  endif()
  # A stripped binary would pass vacuously: it must show the client's own symbols.
  execute_process(COMMAND "${NM}" -C "${binary}" COMMAND grep -c "PlacementClient"
                  OUTPUT_VARIABLE client_symbols OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT client_symbols GREATER 0)
    message(FATAL_ERROR "nm -C ${binary} failed or the binary has no symbol table")
  endif()
  execute_process(COMMAND "${NM}" -C "${binary}" COMMAND grep -m 5 -E "${PLACEMENT_ALGORITHM_SYMBOL_REGEX}"
                  OUTPUT_VARIABLE algorithm_symbols)
  if(NOT algorithm_symbols STREQUAL "")
    string(APPEND problems "${binary} contains algorithm code:\n${algorithm_symbols}")
  endif()
  message(STATUS "${binary}: NEEDED entries and symbols checked")
endforeach()

if(problems)
  message(FATAL_ERROR "the client links algorithm code (it must stay light):\n${problems}")
endif()
