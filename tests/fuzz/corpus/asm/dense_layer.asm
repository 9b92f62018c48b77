; A dense layer on a 16 x 16 TPU: y = relu(x W + b) for 64 inputs of 32 features and
; 16 outputs, with K = 32 folded into two 16-row weight tiles (docs/isa.md).
;
; host memory: 0x0000  x, 64 rows x 32 int8 = two 16-byte column blocks per row, stored
;                      as block 0 (64 rows) then block 1 (64 rows)
;              0x1000  one VPU parameter set (bias, multiplier, shift for 16 lanes)
;              0x2000  y, 64 rows x 16 int8 (written back)
; weight memory: 0x0   W rows 0-15 (tile 0), then rows 16-31 (tile 1)

read_host    host=0x0000 ub=0 rows=128       ; both column blocks of x
read_host    host=0x1000 params=0 rows=1     ; bias and requantization of the 16 outputs
read_weights addr=0x0 tiles=2                ; both tiles into the weight FIFO
matmul       ub=0 acc=0 rows=64 switch             ; x[:, 0:16] x W[0:16, :]
matmul       ub=64 acc=0 rows=64 switch accumulate ; + x[:, 16:32] x W[16:32, :]
activate     acc=0 ub=128 rows=64 params=0 relu    ; bias, requantize, ReLU -> int8
write_host   ub=128 host=0x2000 rows=64
sync
halt
