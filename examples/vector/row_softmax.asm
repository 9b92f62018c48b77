; A softmax of 8 rows of 4 (the worked program of docs/isa.md, "The vector unit") on the 4 x 4
; teaching chip as a bf16 chip, small enough to follow in a waveform:
;   tpusim exec examples/vector/row_softmax.asm -c teach-4 --set dtype=bf16 \
;       --host-in examples/vector/row_softmax.host.bin --trace vector.fst
;   gtkwave vector.fst vector.vector.gtkw      # the vector unit's layout (traces/README.md)
; row_softmax.host.bin: 8 rows of 4 bfloat16 scores (make_row_softmax.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=8
vector op=lane_max a=0 out=8 rows=8 o32          ; rows 8-23: m = max of each row (float32)
vector op=sub a=0 b=8 out=24 rows=8 b32 o32      ; rows 24-39: x - m
vector op=exp a=24 out=24 rows=8 a32 o32         ; in place: e = exp(x - m)
vector op=lane_sum a=24 out=40 rows=8 a32 o32    ; rows 40-55: s = the sum of each row's e
vector op=recip a=40 out=40 rows=8 a32 o32       ; in place: 1 / s
vector op=mul a=24 b=40 out=56 rows=8 a32 b32    ; rows 56-63: softmax(x), bfloat16
write_host ub=56 host=0x100 rows=8
halt
