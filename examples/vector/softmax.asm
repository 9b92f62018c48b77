; Softmax over rows of 197 (attention scores of ViT-B/16's 197 tokens) on the vector unit of
; one tpu-v3 core: 197 rows, each 197 wide, held as two blocks of 128-lane buffer rows (lanes
; 0-127 at rows 0-196, lanes 128-196 at rows 197-393, the 59 lanes past 197 set to -infinity
; so that they neither win the maximum nor add to the sum). Inputs and outputs bfloat16,
; everything between float32 (two buffer rows a row). make_softmax.py writes the input and
; the expected output (numpy, float32, the chip's order); docs/vpu.md explains each step.
;   tpusim exec examples/vector/softmax.asm -c tpu-v3 --host-in examples/vector/softmax.host.bin \
;       --host-out out.bin --host-out-range 0x20000:100864
set_format dtype=bf16
read_host host=0x0 ub=0 rows=394
vector op=lane_max a=0 out=400 rows=197 o32            ; m0: each row's max over lanes 0-127
vector op=lane_max a=197 out=800 rows=197 o32          ; m1: over lanes 128-255
vector op=max a=400 b=800 out=400 rows=197 a32 b32 o32 ; m = max(m0, m1), in every lane
vector op=sub a=0 b=400 out=1200 rows=197 b32 o32      ; x - m, both blocks
vector op=sub a=197 b=400 out=1600 rows=197 b32 o32
vector op=exp a=1200 out=1200 rows=197 a32 o32         ; e = exp(x - m), in place
vector op=exp a=1600 out=1600 rows=197 a32 o32
vector op=lane_sum a=1200 out=2000 rows=197 a32 o32    ; s = the sums of both blocks
vector op=lane_sum a=1600 out=2400 rows=197 a32 o32
vector op=add a=2000 b=2400 out=2000 rows=197 a32 b32 o32
vector op=recip a=2000 out=2000 rows=197 a32 o32       ; 1 / s
vector op=mul a=1200 b=2000 out=2800 rows=197 a32 b32  ; e / s, rounded to bfloat16
vector op=mul a=1600 b=2000 out=2997 rows=197 a32 b32
write_host ub=2800 host=0x20000 rows=394
halt
