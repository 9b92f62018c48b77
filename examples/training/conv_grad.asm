; The weight gradient of LeNet's first convolution, two images (make_conv_grad.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=128   ; the identity
read_host host=0x8000 ub=128 rows=16   ; two 32 x 32 maps, 128 pixels a row
read_host host=0x9000 params=0 rows=1   ; bias 0, no bound
read_host host=0x9800 params=1 rows=1   ; bias 1 in lane 9
read_host host=0x80800 ub=2056 rows=120   ; zeros past F's last pixel (dZ's)
load_weights ub=0 tiles=1   ; the identity: the window's taps as they are
set_window in_h=32 in_w=32 kh=3 kw=3 out_h=30 out_w=30 stride_y=1 stride_x=1 channels=1 pixel_bytes=1
read_host host=0x10000 ub=2304 rows=1920   ; dZ: 1,800 pixel rows, zeros after
matmul ub=128 acc=0 rows=900 ktile=0 window switch   ; image 0: a row a pixel, lanes 0-8 its taps
matmul ub=136 acc=900 rows=900 ktile=0 window   ; image 1: a row a pixel, lanes 0-8 its taps
activate acc=0 ub=256 rows=1800 params=1   ; F: lane 9 = 1
load_weights ub=2304 tiles=1 transpose   ; chunk 0: dZ's rows
matmul ub=0 acc=1920 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=2432 tiles=1 transpose   ; chunk 1: dZ's rows
matmul ub=0 acc=1928 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=2560 tiles=1 transpose   ; chunk 2: dZ's rows
matmul ub=0 acc=1936 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=2688 tiles=1 transpose   ; chunk 3: dZ's rows
matmul ub=0 acc=1944 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=2816 tiles=1 transpose   ; chunk 4: dZ's rows
matmul ub=0 acc=1952 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=2944 tiles=1 transpose   ; chunk 5: dZ's rows
matmul ub=0 acc=1960 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3072 tiles=1 transpose   ; chunk 6: dZ's rows
matmul ub=0 acc=1968 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3200 tiles=1 transpose   ; chunk 7: dZ's rows
matmul ub=0 acc=1976 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3328 tiles=1 transpose   ; chunk 8: dZ's rows
matmul ub=0 acc=1984 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3456 tiles=1 transpose   ; chunk 9: dZ's rows
matmul ub=0 acc=1992 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3584 tiles=1 transpose   ; chunk 10: dZ's rows
matmul ub=0 acc=2000 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3712 tiles=1 transpose   ; chunk 11: dZ's rows
matmul ub=0 acc=2008 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3840 tiles=1 transpose   ; chunk 12: dZ's rows
matmul ub=0 acc=2016 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=3968 tiles=1 transpose   ; chunk 13: dZ's rows
matmul ub=0 acc=2024 rows=6 switch   ; ... transposed: 6 rows
load_weights ub=4096 tiles=1 transpose   ; chunk 14: dZ's rows
matmul ub=0 acc=2032 rows=6 switch   ; ... transposed: 6 rows
activate acc=1920 ub=4224 rows=6 params=0
activate acc=1928 ub=4232 rows=6 params=0
activate acc=1936 ub=4240 rows=6 params=0
activate acc=1944 ub=4248 rows=6 params=0
activate acc=1952 ub=4256 rows=6 params=0
activate acc=1960 ub=4264 rows=6 params=0
activate acc=1968 ub=4272 rows=6 params=0
activate acc=1976 ub=4280 rows=6 params=0
activate acc=1984 ub=4288 rows=6 params=0
activate acc=1992 ub=4296 rows=6 params=0
activate acc=2000 ub=4304 rows=6 params=0
activate acc=2008 ub=4312 rows=6 params=0
activate acc=2016 ub=4320 rows=6 params=0
activate acc=2024 ub=4328 rows=6 params=0
activate acc=2032 ub=4336 rows=6 params=0
load_weights ub=256 tiles=1   ; chunk 0: F's rows
matmul ub=4224 acc=2048 rows=6 switch   ; dWᵀ += dZᵀ F
load_weights ub=384 tiles=1   ; chunk 1: F's rows
matmul ub=4232 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=512 tiles=1   ; chunk 2: F's rows
matmul ub=4240 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=640 tiles=1   ; chunk 3: F's rows
matmul ub=4248 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=768 tiles=1   ; chunk 4: F's rows
matmul ub=4256 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=896 tiles=1   ; chunk 5: F's rows
matmul ub=4264 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1024 tiles=1   ; chunk 6: F's rows
matmul ub=4272 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1152 tiles=1   ; chunk 7: F's rows
matmul ub=4280 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1280 tiles=1   ; chunk 8: F's rows
matmul ub=4288 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1408 tiles=1   ; chunk 9: F's rows
matmul ub=4296 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1536 tiles=1   ; chunk 10: F's rows
matmul ub=4304 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1664 tiles=1   ; chunk 11: F's rows
matmul ub=4312 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1792 tiles=1   ; chunk 12: F's rows
matmul ub=4320 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=1920 tiles=1   ; chunk 13: F's rows
matmul ub=4328 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
load_weights ub=2048 tiles=1   ; chunk 14: F's rows
matmul ub=4336 acc=2048 rows=6 switch accumulate   ; dWᵀ += dZᵀ F
activate acc=2048 ub=4344 rows=6 params=0
write_host ub=4344 host=0x90000 rows=6
halt
