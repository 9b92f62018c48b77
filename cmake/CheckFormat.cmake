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
set(unformatted)
foreach(f ${files})
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${f}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
    list(APPEND unformatted ${rel})
  endif()
endforeach()
if(unformatted)
  list(JOIN unformatted "\n  " names)
  message(FATAL_ERROR "clang_format: these files do not follow .clang-format:\n  ${names}\n"
                      "Fix them with: make format")
endif()
message(STATUS "clang_format: ${count} files follow .clang-format")
