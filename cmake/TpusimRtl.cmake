# Helpers that compile the RTL with Verilator: one verilate() per array size.

set(TPU_RTL_DIR ${CMAKE_SOURCE_DIR}/rtl)
# Where rtl/tpu_pkg.sv finds the generated contract (tpu_contract.svh).
set(TPU_RTL_INCLUDE -I${TPUSIM_GENERATED_DIR}/rtl -I${CMAKE_SOURCE_DIR}/rtl)
# Compile order matters for the package; the top goes last.
# The matrix unit and its accumulators, shared by both tops.
set(TPU_MATRIX_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_delay.sv
  ${TPU_RTL_DIR}/tpu_skew.sv
  ${TPU_RTL_DIR}/tpu_mxu_pe.sv
  ${TPU_RTL_DIR}/tpu_systolic_array_compact.sv
  ${TPU_RTL_DIR}/tpu_systolic_array.sv
  ${TPU_RTL_DIR}/tpu_mxu.sv
  ${TPU_RTL_DIR}/tpu_accumulators.sv
  ${TPU_RTL_DIR}/tpu_matrix_unit.sv)

# The matrix subsystem on its own (tpusim gemm).
set(TPU_MXU_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_pkg.sv
  ${TPU_MATRIX_RTL_SOURCES}
  ${TPU_RTL_DIR}/tpu_mxu_counters.sv
  ${TPU_RTL_DIR}/tpu_mxu_top.sv)

# The output-stationary array, for teaching beside the weight-stationary one (not in the
# chip): tpusim teach --dataflow os|both.
set(TPU_OS_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_pkg.sv
  ${TPU_RTL_DIR}/tpu_delay.sv
  ${TPU_RTL_DIR}/tpu_skew.sv
  ${TPU_RTL_DIR}/tpu_os_pe.sv
  ${TPU_RTL_DIR}/tpu_os_array.sv
  ${TPU_RTL_DIR}/tpu_os_top.sv)

# The whole chip: the matrix subsystem plus controller, DMA, buffers and VPU.
set(TPU_TOP_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_pkg.sv
  ${TPU_RTL_DIR}/tpu_fifo.sv
  ${TPU_MATRIX_RTL_SOURCES}
  ${TPU_RTL_DIR}/tpu_vpu.sv
  ${TPU_RTL_DIR}/tpu_unified_buffer.sv
  ${TPU_RTL_DIR}/tpu_host_dma.sv
  ${TPU_RTL_DIR}/tpu_weight_dma.sv
  ${TPU_RTL_DIR}/tpu_mxu_feeder.sv
  ${TPU_RTL_DIR}/tpu_activate_unit.sv
  ${TPU_RTL_DIR}/tpu_vector_unit.sv
  ${TPU_RTL_DIR}/tpu_controller.sv
  ${TPU_RTL_DIR}/tpu_top.sv)

# A chip of several cores sharing the external memories (issue 29: not yet built into a
# system; linted at several sizes by the fast suite).
set(TPU_CHIP_RTL_SOURCES
  ${TPU_TOP_RTL_SOURCES}
  ${TPU_RTL_DIR}/tpu_mem_arbiter.sv
  ${TPU_RTL_DIR}/tpu_chip.sv)

# tpusim_verilate(TARGET <verilate() arguments>): verilate(), with Verilator's generated files
# compiled a group at a time. Verilator writes a model as many .cpp files (constructors,
# evaluation, trace, constant pool, ...) and verilate() compiles each on its own; each
# compile first parses verilated.h, and systemc.h for a SystemC model: 1.7-2.5 s a file, over
# two thirds of a small model's build (the 4 x 4 chip's 10 files, one at a time: 24.2 s; as
# two groups, 8.9 s; docs/performance.md, "Build and test times"). So each model's fast-path
# files (built with OPT_FAST) and its run-once files (OPT_SLOW) are packed, in Verilator's
# order, into groups of at most TPUSIM_VERILATED_GROUP_BYTES of source, each compiled as one
# file that includes them, as Verilator's own makefile does for a whole model
# (verilated.mk's __ALL.cpp when VM_PARALLEL_BUILDS is not 1); a file larger than that stays
# on its own, so the large models keep their parallel compiles.
set(TPUSIM_VERILATED_GROUP_BYTES 2000000 CACHE STRING
    "Verilator's generated files of one model are compiled in groups of at most this many bytes of source (0: each on its own)")
if(NOT TPUSIM_VERILATED_GROUP_BYTES MATCHES "^[0-9]+$")
  message(FATAL_ERROR "TPUSIM_VERILATED_GROUP_BYTES is '${TPUSIM_VERILATED_GROUP_BYTES}': give a "
                      "number of bytes (2000000, the default; 0 compiles each generated file on "
                      "its own), e.g. cmake -B build -DTPUSIM_VERILATED_GROUP_BYTES=2000000")
endif()
function(tpusim_verilate TARGET)
  verilate(${TARGET} ${ARGN})
  if(NOT TPUSIM_VERILATED_GROUP_BYTES)
    return()
  endif()
  cmake_parse_arguments(V "COVERAGE;TRACE;TRACE_FST;SYSTEMC;TRACE_STRUCTS"
                        "PREFIX;TOP_MODULE;THREADS;TRACE_THREADS;DIRECTORY"
                        "SOURCES;VERILATOR_ARGS;INCLUDE_DIRS;OPT_SLOW;OPT_FAST;OPT_GLOBAL" ${ARGN})
  get_target_property(bin ${TARGET} BINARY_DIR)
  set(vdir ${bin}/CMakeFiles/${TARGET}.dir/${V_PREFIX}.dir)
  if(V_DIRECTORY)
    set(vdir ${V_DIRECTORY})
  endif()
  # The lists of generated files verilate() read (Verilator's --make cmake output).
  include(${vdir}/${V_PREFIX}_copy.cmake)
  foreach(speed FAST SLOW)
    set(files ${${V_PREFIX}_CLASSES_${speed}} ${${V_PREFIX}_SUPPORT_${speed}})
    string(JOIN " " flags ${V_OPT_${speed}} ${${V_PREFIX}_USER_CFLAGS})
    set(group "")
    set(bytes 0)
    set(k 0)
    foreach(f ${files})
      set(size 0)
      if(EXISTS ${f})
        file(SIZE ${f} size)
      endif()
      math(EXPR total "${bytes} + ${size}")
      if(group AND total GREATER TPUSIM_VERILATED_GROUP_BYTES)
        tpusim_verilated_group(${TARGET} ${vdir}/${V_PREFIX}__${speed}_group${k}.cpp "${flags}"
                               ${group})
        math(EXPR k "${k} + 1")
        set(group "")
        set(total ${size})
      endif()
      list(APPEND group ${f})
      set(bytes ${total})
    endforeach()
    if(group)
      tpusim_verilated_group(${TARGET} ${vdir}/${V_PREFIX}__${speed}_group${k}.cpp "${flags}"
                             ${group})
    endif()
  endforeach()
endfunction()

# tpusim_verilated_group(TARGET OUT FLAGS FILE...): compiles Verilator's FILEs as one, through
# OUT, which includes them, with FLAGS; one FILE is left to compile on its own.
function(tpusim_verilated_group TARGET OUT FLAGS)
  list(LENGTH ARGN n)
  if(n LESS 2)
    return()
  endif()
  set_source_files_properties(${ARGN} PROPERTIES HEADER_FILE_ONLY ON)
  set(content "// Generated by tpusim_verilate() (cmake/TpusimRtl.cmake): Verilator's files, compiled as one.\n")
  foreach(f ${ARGN})
    string(APPEND content "#include \"${f}\"\n")
  endforeach()
  file(CONFIGURE OUTPUT ${OUT} CONTENT "${content}" @ONLY)
  target_sources(${TARGET} PRIVATE ${OUT})
  set_source_files_properties(${OUT} PROPERTIES COMPILE_FLAGS "${FLAGS}" OBJECT_DEPENDS "${ARGN}")
endfunction()

# The buffer sizes of each RTL model come from the presets in configs/ (their one home):
# the model of array size N and number format D (the config field dtype) has the
# parameters of the preset with array_dim N and dtype D (which ones, and their tpu_top
# names, come from contract/tpu_contract.toml through the generated tpu_params.cmake); a
# model without a preset gets small-16's. tpusim reads them back from the model at run time
# and checks them against the config.
include(${TPUSIM_GENERATED_DIR}/cmake/tpu_params.cmake)
file(GLOB TPUSIM_PRESET_FILES ${CMAKE_SOURCE_DIR}/configs/*.json)
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${TPUSIM_PRESET_FILES})
set(TPUSIM_PRESET_DIMS_int8 "")
set(TPUSIM_PRESET_DIMS_bf16 "")
foreach(file ${TPUSIM_PRESET_FILES})
  file(READ ${file} json)
  string(JSON name GET "${json}" name)
  string(JSON n GET "${json}" array_dim)
  string(JSON dtype ERROR_VARIABLE no_dtype GET "${json}" dtype)
  if(no_dtype)
    set(dtype ${TPUSIM_RTL_DEFAULT_dtype})
  endif()
  set(params "")
  foreach(key ${TPUSIM_RTL_PARAM_FIELDS})
    string(JSON value ERROR_VARIABLE no_value GET "${json}" ${key})
    if(no_value)
      set(value ${TPUSIM_RTL_DEFAULT_${key}})
    endif()
    list(APPEND params ${value})
  endforeach()
  set(key ${dtype}_${n})
  if(DEFINED TPUSIM_PRESET_PARAMS_${key} AND NOT "${TPUSIM_PRESET_PARAMS_${key}}" STREQUAL "${params}")
    message(FATAL_ERROR "${file}: two ${dtype} presets of array size ${n} ask for different RTL "
                        "parameters (${TPUSIM_RTL_PARAM_FIELDS}: ${TPUSIM_PRESET_PARAMS_${key}} and "
                        "${params}); one RTL model is built per size and format")
  endif()
  set(TPUSIM_PRESET_PARAMS_${key} ${params})
  if(NOT DEFINED TPUSIM_PRESET_NAME_${key})
    set(TPUSIM_PRESET_NAME_${key} ${name})
  endif()
  list(APPEND TPUSIM_PRESET_DIMS_${dtype} ${n})
  set(TPUSIM_PRESET_SHAPE_${name} ${n} ${dtype})
  # A preset of several cores or matrix units (tpu-v3, tpu-v4) runs on a tpu_chip model,
  # named in TPUSIM_TPU_CHIPS by the preset's name or its shape (tpusim_chip_spec).
  string(JSON cores ERROR_VARIABLE no_cores GET "${json}" cores)
  string(JSON mxus ERROR_VARIABLE no_mxus GET "${json}" mxus_per_core)
  if(no_cores)
    set(cores 1)
  endif()
  if(no_mxus)
    set(mxus 1)
  endif()
  if(cores GREATER 1 OR mxus GREATER 1)
    set(chip "${cores}x")
    if(mxus GREATER 1)
      string(APPEND chip "${mxus}x")
    endif()
    string(APPEND chip "${n}")
    if(NOT dtype STREQUAL "int8")
      string(APPEND chip "${dtype}")
    endif()
    set(TPUSIM_PRESET_CHIP_${name} ${chip})
  endif()
endforeach()
foreach(dtype int8 bf16)
  list(REMOVE_DUPLICATES TPUSIM_PRESET_DIMS_${dtype})
  list(SORT TPUSIM_PRESET_DIMS_${dtype} COMPARE NATURAL)
endforeach()

# tpusim_rtl_config_args(N DTYPE OUT): tpusim's config flags for the chip the model of size N
# and format DTYPE is built for: its preset, else small-16 at that size and format.
function(tpusim_rtl_config_args N DTYPE OUT)
  if(DEFINED TPUSIM_PRESET_NAME_${DTYPE}_${N})
    set(${OUT} -c ${TPUSIM_PRESET_NAME_${DTYPE}_${N}} PARENT_SCOPE)
  else()
    set(${OUT} -c small-16 --set array_dim=${N} --set dtype=${DTYPE} PARENT_SCOPE)
  endif()
endfunction()

# tpusim_rtl_param(N DTYPE FIELD OUT): the value of config field FIELD in the model of size
# N and format DTYPE.
function(tpusim_rtl_param N DTYPE FIELD OUT)
  if(DEFINED TPUSIM_PRESET_PARAMS_${DTYPE}_${N})
    set(p ${TPUSIM_PRESET_PARAMS_${DTYPE}_${N}})
  else()
    set(p ${TPUSIM_PRESET_PARAMS_int8_16})
  endif()
  list(FIND TPUSIM_RTL_PARAM_FIELDS ${FIELD} i)
  list(GET p ${i} value)
  set(${OUT} ${value} PARENT_SCOPE)
endfunction()

# tpusim_rtl_dtype(DTYPE OUT): the -G flag of number format DTYPE (int8, bf16) for a top
# module's Dtype parameter: the value's number in the contract's enum (rtl/tpu_pkg.sv,
# dtype_e), which the top passes down as its typed Format.
function(tpusim_rtl_dtype DTYPE OUT)
  list(FIND TPUSIM_RTL_ENUM_dtype_VALUES ${DTYPE} i)
  if(i LESS 0)
    message(FATAL_ERROR "no number format '${DTYPE}' (${TPUSIM_RTL_ENUM_dtype_VALUES})")
  endif()
  set(${OUT} -G${TPUSIM_RTL_ENUM_dtype_PARAM}=${i} PARENT_SCOPE)
endfunction()

# tpusim_rtl_params(N DTYPE OUT): the -G flags of every tpu_top parameter of the model of
# size N and format DTYPE, the format's among them.
function(tpusim_rtl_params N DTYPE OUT)
  set(flags -GArrayDim=${N})
  foreach(field name IN ZIP_LISTS TPUSIM_RTL_PARAM_FIELDS TPUSIM_RTL_PARAM_NAMES)
    tpusim_rtl_param(${N} ${DTYPE} ${field} value)
    list(APPEND flags -G${name}=${value})
  endforeach()
  tpusim_rtl_dtype(${DTYPE} format)
  set(${OUT} ${flags} ${format} PARENT_SCOPE)
endfunction()

# Arrays of TPUSIM_COMPACT_FROM and more PEs a side use the compact array form
# (rtl/tpu_systolic_array_compact.sv): the same cycles, Verilator output that does not grow
# with N^2. Smaller ones keep the per-PE form that the teaching views probe.
function(tpusim_array_form N OUT)
  if(N GREATER_EQUAL TPUSIM_COMPACT_FROM)
    set(${OUT} "-GCompactArray=1'b1" PARENT_SCOPE)
  else()
    set(${OUT} "-GCompactArray=1'b0" PARENT_SCOPE)
  endif()
endfunction()

# tpusim_verilate_mxu(TARGET N [SYSTEMC] [NOTRACE] [TEACH] [BF16] [COMPACT|PER_PE] [PREFIX P]):
# adds class Vtpu_mxu_n<N> (C++, with FST tracing) or Vtpu_mxu_sc_n<N> (SystemC) to TARGET;
# TEACH adds Vtpu_mxu_teach_n<N>, whose every signal is readable by name through VPI (tpusim
# teach); BF16 builds the bfloat16 matrix unit (Dtype bf16, docs/bf16.md) as Vtpu_mxu_bf16_n<N>,
# Vtpu_mxu_bf16_sc_n<N> or Vtpu_mxu_teach_bf16_n<N>.
function(tpusim_verilate_mxu TARGET N)
  cmake_parse_arguments(ARG "SYSTEMC;NOTRACE;TEACH;BF16;COMPACT;PER_PE" "PREFIX" "" ${ARGN})
  set(dtype int8)
  if(ARG_BF16)
    set(dtype bf16)  # the accumulator depth of the bf16 preset of this size (tpu-v2's)
  endif()
  tpusim_rtl_param(${N} ${dtype} acc_depth_rows depth)
  tpusim_array_form(${N} form)
  if(ARG_COMPACT)
    set(form "-GCompactArray=1'b1")
  elseif(ARG_PER_PE)
    set(form "-GCompactArray=1'b0")
  endif()
  set(args -Wall -Wno-fatal --x-assign fast --x-initial fast -O3 --assert ${TPU_RTL_INCLUDE}
      -GArrayDim=${N} -GAccDepth=${depth} ${form})
  tpusim_rtl_dtype(${dtype} format)
  list(APPEND args ${format})
  set(kind "")
  if(ARG_BF16)
    set(kind "bf16_")
  endif()
  if(ARG_SYSTEMC)
    tpusim_verilate(${TARGET} SYSTEMC PREFIX Vtpu_mxu_${kind}sc_n${N} TOP_MODULE tpu_mxu_top
                    SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
                    ${TPUSIM_VERILATED_OPTS})
  elseif(ARG_TEACH)
    tpusim_verilate(${TARGET} PREFIX Vtpu_mxu_teach_${kind}n${N} TOP_MODULE tpu_mxu_top
                    SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args} --vpi --public-flat-rw
                    ${TPUSIM_VERILATED_OPTS})
  elseif(ARG_NOTRACE)
    tpusim_verilate(${TARGET} PREFIX ${ARG_PREFIX} TOP_MODULE tpu_mxu_top
                    SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
                    ${TPUSIM_VERILATED_OPTS})
  else()
    tpusim_verilate(${TARGET} TRACE_FST PREFIX Vtpu_mxu_${kind}n${N} TOP_MODULE tpu_mxu_top
                    SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
                    ${TPUSIM_VERILATED_OPTS})
  endif()
endfunction()

# tpusim_chip_spec(ENTRY OUT): a TPUSIM_TPU_CHIPS entry as a shape: the shape of the preset
# ENTRY names (tpu-v3: "2x2x128bf16"), else ENTRY itself.
function(tpusim_chip_spec ENTRY OUT)
  if(DEFINED TPUSIM_PRESET_CHIP_${ENTRY})
    set(${OUT} ${TPUSIM_PRESET_CHIP_${ENTRY}} PARENT_SCOPE)
  else()
    set(${OUT} ${ENTRY} PARENT_SCOPE)
  endif()
endfunction()

# tpusim_parse_chip(ENTRY CORES MXUS N DTYPE): the parts of a TPUSIM_TPU_CHIPS entry, "CxN"
# or "CxMxN" (C cores of M matrix units of N x N), "bf16" after N for that format, or the
# name of a preset of several cores or units.
function(tpusim_parse_chip ENTRY CORES MXUS N DTYPE)
  tpusim_chip_spec(${ENTRY} SPEC)
  if(NOT SPEC MATCHES "^([0-9]+)x(([0-9]+)x)?([0-9]+)(bf16)?$")
    message(FATAL_ERROR "TPUSIM_TPU_CHIPS: '${SPEC}' is not CORESxN or CORESxMXUSxN, with bf16 "
                        "after N for that format (as 2x4, 1x2x4, 2x128bf16), nor a preset of "
                        "several cores or matrix units (as tpu-v3)")
  endif()
  set(${CORES} ${CMAKE_MATCH_1} PARENT_SCOPE)
  if(CMAKE_MATCH_3)
    set(${MXUS} ${CMAKE_MATCH_3} PARENT_SCOPE)
  else()
    set(${MXUS} 1 PARENT_SCOPE)
  endif()
  set(${N} ${CMAKE_MATCH_4} PARENT_SCOPE)
  if(CMAKE_MATCH_5)
    set(${DTYPE} bf16 PARENT_SCOPE)
  else()
    set(${DTYPE} int8 PARENT_SCOPE)
  endif()
endfunction()

# tpusim_verilate_tpu(TARGET N DTYPE [CORES C [MXUS M]]): adds class Vtpu_top_sc_n<N> (int8)
# or Vtpu_top_bf16_sc_n<N> (bf16), tpu_top as a SystemC module with FST tracing, to TARGET;
# with CORES, tpu_chip of C cores of M matrix units (default 1) instead, as
# Vtpu_chip_c<C>_m<M>_sc_n<N> or Vtpu_chip_c<C>_m<M>_bf16_sc_n<N>.
function(tpusim_verilate_tpu TARGET N DTYPE)
  cmake_parse_arguments(ARG "" "CORES;MXUS" "" ${ARGN})
  if(NOT ARG_MXUS)
    set(ARG_MXUS 1)
  endif()
  tpusim_rtl_params(${N} ${DTYPE} gflags)
  set(kind "")
  if(NOT DTYPE STREQUAL "int8")
    set(kind "${DTYPE}_")
  endif()
  tpusim_array_form(${N} form)
  set(coverage "")
  if(TPUSIM_RTL_COVERAGE)
    set(coverage COVERAGE)
  endif()
  set(top tpu_top)
  set(prefix Vtpu_top_${kind}sc_n${N})
  set(sources ${TPU_TOP_RTL_SOURCES})
  if(ARG_CORES)
    set(top tpu_chip)
    set(prefix Vtpu_chip_c${ARG_CORES}_m${ARG_MXUS}_${kind}sc_n${N})
    set(sources ${TPU_CHIP_RTL_SOURCES})
    list(APPEND gflags -GCores=${ARG_CORES} -GMxus=${ARG_MXUS})
  endif()
  tpusim_verilate(${TARGET} SYSTEMC TRACE_FST ${coverage} PREFIX ${prefix} TOP_MODULE ${top}
                  SOURCES ${sources}
                  VERILATOR_ARGS -Wall -Wno-fatal --x-assign fast --x-initial fast -O3 --assert
                                 ${TPU_RTL_INCLUDE} ${gflags} ${form}
                  ${TPUSIM_VERILATED_OPTS})
endfunction()

# tpusim_verilate_os(TARGET N): adds class Vtpu_os_teach_n<N>, the output-stationary array
# with every signal readable through VPI, to TARGET.
function(tpusim_verilate_os TARGET N)
  tpusim_verilate(${TARGET} PREFIX Vtpu_os_teach_n${N} TOP_MODULE tpu_os_top
                  SOURCES ${TPU_OS_RTL_SOURCES}
                  VERILATOR_ARGS -Wall -Wno-fatal --x-assign fast --x-initial fast -O3 --assert
                                 ${TPU_RTL_INCLUDE} -GArrayDim=${N} --vpi --public-flat-rw
                  ${TPUSIM_VERILATED_OPTS})
endfunction()

# tpusim_rtl_only(INT8 BF16 CHIPS): the whole-chip models the presets named in TPUSIM_RTL_ONLY
# run on: the int8 and bf16 tpu_top array sizes and the tpu_chip shapes.
function(tpusim_rtl_only INT8 BF16 CHIPS)
  set(int8 "")
  set(bf16 "")
  set(chips "")
  foreach(name ${TPUSIM_RTL_ONLY})
    if(NOT DEFINED TPUSIM_PRESET_SHAPE_${name})
      file(GLOB files RELATIVE ${CMAKE_SOURCE_DIR}/configs ${CMAKE_SOURCE_DIR}/configs/*.json)
      string(REPLACE ".json" "" names "${files}")
      string(REPLACE ";" ", " names "${names}")
      message(FATAL_ERROR "TPUSIM_RTL_ONLY: no preset named '${name}' in configs/ (there are: "
                          "${names}); name presets, or set it empty for every model")
    endif()
    list(GET TPUSIM_PRESET_SHAPE_${name} 0 n)
    list(GET TPUSIM_PRESET_SHAPE_${name} 1 dtype)
    if(DEFINED TPUSIM_PRESET_CHIP_${name})
      list(APPEND chips ${TPUSIM_PRESET_CHIP_${name}})
    else()
      list(APPEND ${dtype} ${n})
    endif()
  endforeach()
  set(${INT8} ${int8} PARENT_SCOPE)
  set(${BF16} ${bf16} PARENT_SCOPE)
  set(${CHIPS} ${chips} PARENT_SCOPE)
endfunction()
