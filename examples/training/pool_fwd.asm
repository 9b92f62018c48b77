; A 2 x 2 average pooling, raster order (make_pool_fwd.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=1800   ; 2 images x 30 x 30 pixels, 6 lanes
read_host host=0x78800 params=0 rows=1   ; set 0: bias 0, no upper bound
read_weights addr=0x70800 tiles=1   ; four identities x 1/4, one a tap
set_window in_h=60 in_w=30 kh=2 kw=2 out_h=30 out_w=15 stride_y=2 stride_x=2 channels=6 pixel_bytes=128
matmul ub=0 acc=0 rows=450 ktile=0 window switch
activate acc=0 ub=1800 rows=450 params=0
write_host ub=1800 host=0x79000 rows=450
halt
