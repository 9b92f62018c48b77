# ctest clang_format: every C++ source under the tree's code folders follows .clang-format.
# Run as: cmake -DCLANG_FORMAT=... -DSOURCE_DIR=... -P CheckFormat.cmake
# On failure it names the files and the command that fixes them (make format).
set(folders bench fast host sim tests)
set(files)
foreach(folder ${folders})
  file(GLOB_RECURSE found ${SOURCE_DIR}/${folder}/*.cc ${SOURCE_DIR}/${folder}/*.h
       ${SOURCE_DIR}/${folder}/*.cu)
  list(APPEND files ${found})
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "clang_format: no C++ sources found under ${SOURCE_DIR}")
endif()
# One clang-format for every file (a process per file took 52 s of the fast suite, this
# 2 s): it names each file that differs in its errors ("FILE:LINE:COL: error: ...").
execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${files}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE errors)
set(unformatted)
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "[^\n]+:[0-9]+:[0-9]+: error:" found "${errors}")
  foreach(line ${found})
    string(REGEX REPLACE ":[0-9]+:[0-9]+: error:$" "" f "${line}")
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
    list(APPEND unformatted ${rel})
  endforeach()
  list(REMOVE_DUPLICATES unformatted)
  if(NOT unformatted)  # it failed without naming a file: say what it said
    message(FATAL_ERROR "clang_format: ${CLANG_FORMAT} failed (${rc}):\n${errors}")
  endif()
endif()
if(unformatted)
  list(JOIN unformatted "\n  " names)
  message(FATAL_ERROR "clang_format: these files do not follow .clang-format:\n  ${names}\n"
                      "Fix them with: make format")
endif()
message(STATUS "clang_format: ${count} files follow .clang-format")
