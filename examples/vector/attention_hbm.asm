; The attention head of attention.asm with Q, K and V in HBM, as a layer before it would
; leave them: read_hbm brings them into the unified buffer (vector memory) at HBM's
; bandwidth instead of the host link's; only the two VPU parameter sets still come from the
; host. The same data file serves as both memories' image (the addresses are the same), so
; the expected output is attention.expected.bin. Written by make_attention.py from
; attention.asm: edit that one.
;   tpusim exec examples/vector/attention_hbm.asm -c tpu-v3 --engine fast \
;       --host-in examples/vector/attention.host.bin \
;       --weights-in examples/vector/attention.host.bin --host-out out.bin \
;       --host-out-range 0x40000:50432
set_format dtype=bf16
read_host host=0x0 params=0 rows=2           ; set 0: bias 0; set 1: -inf past key 197
read_hbm addr=0x1000 ub=256 rows=197         ; K: rows 256-452
vector op=sub a=256 b=256 out=453 rows=59    ; rows 453-511 zero (x - x): the keys past 197
load_weights ub=256 tiles=1 transpose mxu=0  ; K^T of keys 0-127
load_weights ub=384 tiles=1 transpose mxu=1  ; K^T of keys 128-255
read_hbm addr=0xd500 ub=0 rows=198           ; Q: rows 0-196; row 197: 0.125 in every lane
vector op=mul a=0 b=197 out=0 rows=197 bcast ; Q / 8, in place (exact: a power of two)
matmul ub=0 acc=0 rows=197 switch mxu=0      ; scores of keys 0-127
matmul ub=0 acc=0 rows=197 switch mxu=1      ; scores of keys 128-255
read_hbm addr=0x19b00 ub=512 rows=197        ; V: rows 512-708, while the softmax runs
activate acc=0 ub=1024 rows=197 params=0 mxu=0   ; S, lanes 0-127: rows 1024-1220
activate acc=0 ub=1221 rows=197 params=1 mxu=1   ; S, lanes 128-255 (-inf past 197)
vector op=lane_max a=1024 out=1600 rows=197 o32            ; the softmax of softmax.asm
vector op=lane_max a=1221 out=2000 rows=197 o32
vector op=max a=1600 b=2000 out=1600 rows=197 a32 b32 o32  ; m: each row's max
vector op=sub a=1024 b=1600 out=2400 rows=197 b32 o32      ; S - m
vector op=sub a=1221 b=1600 out=2800 rows=197 b32 o32
vector op=exp a=2400 out=2400 rows=197 a32 o32             ; e = exp(S - m)
vector op=exp a=2800 out=2800 rows=197 a32 o32
vector op=lane_sum a=2400 out=3200 rows=197 a32 o32        ; the sum of e
vector op=lane_sum a=2800 out=3600 rows=197 a32 o32
vector op=add a=3200 b=3600 out=3200 rows=197 a32 b32 o32
vector op=recip a=3200 out=3200 rows=197 a32 o32           ; 1 / sum
vector op=mul a=2400 b=3200 out=4000 rows=197 a32 b32      ; P, keys 0-127: rows 4000-4196
vector op=mul a=2800 b=3200 out=4197 rows=197 a32 b32      ; P, keys 128-255: rows 4197-4393
vector op=sub a=512 b=512 out=709 rows=59    ; rows 709-767 zero: V of the keys past 197
load_weights ub=512 tiles=2 mxu=0            ; V, keys 0-127 then 128-255
load_weights ub=512 tiles=2 mxu=1            ; the same into unit 1
matmul ub=4000 acc=256 rows=99 switch mxu=0             ; queries 0-98: P V of keys 0-127
matmul ub=4197 acc=256 rows=99 switch accumulate mxu=0  ; ... plus keys 128-255
matmul ub=4099 acc=256 rows=98 switch mxu=1             ; queries 99-196 on unit 1
matmul ub=4296 acc=256 rows=98 switch accumulate mxu=1
activate acc=256 ub=4400 rows=99 params=0 mxu=0          ; the output, bfloat16
activate acc=256 ub=4499 rows=98 params=0 mxu=1
write_host ub=4400 host=0x40000 rows=197
halt
