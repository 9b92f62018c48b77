; The input gradient of LeNet's second convolution, two images (make_conv_input_grad.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=128   ; the identity
read_host host=0x8000 ub=128 rows=256   ; W as the forward pass's tile: rows (ky, kx, i), lanes o
read_host host=0x18000 ub=640 rows=338   ; dZ: 2 x 13 x 13 pixels, 16 lanes
read_host host=0x2e000 params=0 rows=1   ; bias 0, no bound
read_host host=0x10000 ub=528 rows=112   ; zeros past W''
load_weights ub=128 tiles=1 transpose   ; tap 0: its 6 rows
matmul ub=0 acc=0 rows=16 switch   ; ... transposed
load_weights ub=134 tiles=1 transpose   ; tap 1: its 6 rows
matmul ub=0 acc=16 rows=16 switch   ; ... transposed
load_weights ub=140 tiles=1 transpose   ; tap 2: its 6 rows
matmul ub=0 acc=32 rows=16 switch   ; ... transposed
load_weights ub=146 tiles=1 transpose   ; tap 3: its 6 rows
matmul ub=0 acc=48 rows=16 switch   ; ... transposed
load_weights ub=152 tiles=1 transpose   ; tap 4: its 6 rows
matmul ub=0 acc=64 rows=16 switch   ; ... transposed
load_weights ub=158 tiles=1 transpose   ; tap 5: its 6 rows
matmul ub=0 acc=80 rows=16 switch   ; ... transposed
load_weights ub=164 tiles=1 transpose   ; tap 6: its 6 rows
matmul ub=0 acc=96 rows=16 switch   ; ... transposed
load_weights ub=170 tiles=1 transpose   ; tap 7: its 6 rows
matmul ub=0 acc=112 rows=16 switch   ; ... transposed
load_weights ub=176 tiles=1 transpose   ; tap 8: its 6 rows
matmul ub=0 acc=128 rows=16 switch   ; ... transposed
activate acc=0 ub=512 rows=16 params=0   ; W'' tap 8
activate acc=16 ub=496 rows=16 params=0   ; W'' tap 7
activate acc=32 ub=480 rows=16 params=0   ; W'' tap 6
activate acc=48 ub=464 rows=16 params=0   ; W'' tap 5
activate acc=64 ub=448 rows=16 params=0   ; W'' tap 4
activate acc=80 ub=432 rows=16 params=0   ; W'' tap 3
activate acc=96 ub=416 rows=16 params=0   ; W'' tap 2
activate acc=112 ub=400 rows=16 params=0   ; W'' tap 1
activate acc=128 ub=384 rows=16 params=0   ; W'' tap 0
set_window in_h=13 in_w=13 kh=3 kw=3 out_h=15 out_w=15 stride_y=1 stride_x=1 channels=16 pad_top=2 pad_left=2 pixel_bytes=128
load_weights ub=384 tiles=2   ; W'' (two K-tiles)
matmul ub=640 acc=256 rows=225 ktile=0 window switch   ; image 0
matmul ub=640 acc=256 rows=225 ktile=1 window switch accumulate
load_weights ub=384 tiles=2   ; W'' (two K-tiles)
matmul ub=809 acc=481 rows=225 ktile=0 window switch   ; image 1
matmul ub=809 acc=481 rows=225 ktile=1 window switch accumulate
activate acc=256 ub=1024 rows=450 params=0
write_host ub=1024 host=0x30000 rows=450
halt
