; A convolution-style layer with 2 x 2 max pooling on the 4 x 4 teach-4 chip:
; y = maxpool(relu(x W + b)) for 16 output pixels (4 pooling windows of 4 pixels, each
; window's pixels in consecutive rows) with 4 input features and 4 output channels.
;
; host memory: 0x000  x, 16 rows x 4 int8
;              0x100  one VPU parameter set (bias, multiplier, shift for 4 lanes)
;              0x200  y, 4 rows x 4 int8 (written back)
; weight memory: 0x0  W, 4 x 4
; Data: examples/make_pool_layer.py. Run:
;   build/tpusim exec examples/pool_layer.asm --config teach-4 \
;       --host-in examples/pool_layer.host.bin --weights-in examples/pool_layer.weights.bin

read_host    host=0x000 ub=0 rows=16
read_host    host=0x100 params=0 rows=1
read_weights addr=0x0 tiles=1
matmul       ub=0 acc=0 rows=16 switch
activate     acc=0 ub=32 rows=16 params=0 relu pool=max   ; 16 rows in, 4 rows out
write_host   ub=32 host=0x200 rows=4
halt
