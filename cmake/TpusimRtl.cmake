# Helpers that compile the RTL with Verilator: one verilate() per array size.

set(TPU_RTL_DIR ${CMAKE_SOURCE_DIR}/rtl)
# Where rtl/tpu_pkg.sv finds the generated contract (tpu_contract.svh).
set(TPU_RTL_INCLUDE -I${TPUSIM_GENERATED_DIR}/rtl)
# Compile order matters for the package; the top goes last.
# The matrix unit and its accumulators, shared by both tops.
set(TPU_MATRIX_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_delay.sv
  ${TPU_RTL_DIR}/tpu_skew.sv
  ${TPU_RTL_DIR}/tpu_mxu_pe.sv
  ${TPU_RTL_DIR}/tpu_systolic_array.sv
  ${TPU_RTL_DIR}/tpu_mxu.sv
  ${TPU_RTL_DIR}/tpu_accumulators.sv)

# The matrix subsystem on its own (tpusim gemm).
set(TPU_MXU_RTL_SOURCES
  ${TPU_RTL_DIR}/tpu_pkg.sv
  ${TPU_MATRIX_RTL_SOURCES}
  ${TPU_RTL_DIR}/tpu_mxu_counters.sv
  ${TPU_RTL_DIR}/tpu_mxu_top.sv)

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
  ${TPU_RTL_DIR}/tpu_controller.sv
  ${TPU_RTL_DIR}/tpu_top.sv)

# Accumulator rows of the model built for array size N: TPU v1 has 4096 rows of 256.
function(tpusim_acc_depth N OUT)
  if(N GREATER_EQUAL 256)
    set(${OUT} 4096 PARENT_SCOPE)
  else()
    set(${OUT} 1024 PARENT_SCOPE)
  endif()
endfunction()

# tpusim_verilate_mxu(TARGET N [SYSTEMC] [NOTRACE] [TEACH] [PREFIX P]): adds class
# Vtpu_mxu_n<N> (C++, with FST tracing) or Vtpu_mxu_sc_n<N> (SystemC) to TARGET; TEACH adds
# Vtpu_mxu_teach_n<N>, whose every signal is readable by name through VPI (tpusim teach).
function(tpusim_verilate_mxu TARGET N)
  cmake_parse_arguments(ARG "SYSTEMC;NOTRACE;TEACH" "PREFIX" "" ${ARGN})
  tpusim_acc_depth(${N} depth)
  set(args -Wall -Wno-fatal --x-assign fast --x-initial fast -O3 ${TPU_RTL_INCLUDE}
      -GArrayDim=${N} -GAccDepth=${depth})
  if(ARG_SYSTEMC)
    verilate(${TARGET} SYSTEMC PREFIX Vtpu_mxu_sc_n${N} TOP_MODULE tpu_mxu_top
             SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args}
             OPT_FAST ${TPUSIM_OPT_FAST})
  elseif(ARG_TEACH)
    verilate(${TARGET} PREFIX Vtpu_mxu_teach_n${N} TOP_MODULE tpu_mxu_top
             SOURCES ${TPU_MXU_RTL_SOURCES} VERILATOR_ARGS ${args} --vpi --public-flat-rw
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

# Buffer sizes of the whole-chip model built for array size N. The presets in configs/
# must say the same; tpusim reads them back from the model and checks.
function(tpusim_tpu_params N OUT_ACC OUT_UB OUT_FIFO OUT_SETS)
  tpusim_acc_depth(${N} depth)
  set(${OUT_ACC} ${depth} PARENT_SCOPE)
  if(N GREATER_EQUAL 256)
    set(${OUT_UB} 98304 PARENT_SCOPE)  # TPU v1: 24 MiB of 256-byte rows
  else()
    set(${OUT_UB} 16384 PARENT_SCOPE)
  endif()
  set(${OUT_FIFO} 4 PARENT_SCOPE)      # TPU v1: four tiles deep
  set(${OUT_SETS} 32 PARENT_SCOPE)
endfunction()

# tpusim_verilate_tpu(TARGET N): adds class Vtpu_top_sc_n<N>, tpu_top as a SystemC module
# with FST tracing, to TARGET.
function(tpusim_verilate_tpu TARGET N)
  tpusim_tpu_params(${N} acc ub fifo sets)
  verilate(${TARGET} SYSTEMC TRACE_FST PREFIX Vtpu_top_sc_n${N} TOP_MODULE tpu_top
           SOURCES ${TPU_TOP_RTL_SOURCES}
           VERILATOR_ARGS -Wall -Wno-fatal --x-assign fast --x-initial fast -O3
                          ${TPU_RTL_INCLUDE} -GArrayDim=${N} -GAccDepth=${acc} -GUbDepth=${ub}
                          -GWfifoTiles=${fifo} -GParamSets=${sets}
           OPT_FAST ${TPUSIM_OPT_FAST})
endfunction()
