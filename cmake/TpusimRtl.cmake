# Helpers that compile the RTL with Verilator: one verilate() per array size.

set(TPU_RTL_DIR ${CMAKE_SOURCE_DIR}/rtl)
# Compile order matters for the package; the top goes last.
set(TPU_MXU_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_pkg.sv
  ${TPU_RTL_DIR}/tpu_delay.sv
  ${TPU_RTL_DIR}/tpu_skew.sv
  ${TPU_RTL_DIR}/tpu_mxu_pe.sv
  ${TPU_RTL_DIR}/tpu_systolic_array.sv
  ${TPU_RTL_DIR}/tpu_mxu.sv
  ${TPU_RTL_DIR}/tpu_accumulators.sv
  ${TPU_RTL_DIR}/tpu_mxu_counters.sv
  ${TPU_RTL_DIR}/tpu_mxu_top.sv)

# Accumulator rows of the model built for array size N: TPU v1 has 4096 rows of 256.
function(tpusim_acc_depth N OUT)
  if(N GREATER_EQUAL 256)
    set(${OUT} 4096 PARENT_SCOPE)
  else()
    set(${OUT} 1024 PARENT_SCOPE)
  endif()
endfunction()

# tpusim_verilate_mxu(TARGET N [SYSTEMC] [NOTRACE] [PREFIX P]): adds class
# Vtpu_mxu_n<N> (C++, with FST tracing) or Vtpu_mxu_sc_n<N> (SystemC) to TARGET.
function(tpusim_verilate_mxu TARGET N)
  cmake_parse_arguments(ARG "SYSTEMC;NOTRACE" "PREFIX" "" ${ARGN})
  tpusim_acc_depth(${N} depth)
  set(args -Wall -Wno-fatal --x-assign fast --x-initial fast -O3
      -GArrayDim=${N} -GAccDepth=${depth})
  if(ARG_SYSTEMC)
    verilate(${TARGET} SYSTEMC PREFIX Vtpu_mxu_sc_n${N} TOP_MODULE tpu_mxu_top
             SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
             OPT_FAST ${TPUSIM_OPT_FAST})
  elseif(ARG_NOTRACE)
    verilate(${TARGET} PREFIX ${ARG_PREFIX} TOP_MODULE tpu_mxu_top
             SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
             OPT_FAST ${TPUSIM_OPT_FAST})
  else()
    verilate(${TARGET} TRACE_FST PREFIX Vtpu_mxu_n${N} TOP_MODULE tpu_mxu_top
             SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
             OPT_FAST ${TPUSIM_OPT_FAST})
  endif()
endfunction()
