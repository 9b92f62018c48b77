; The gradient of a 2 x 2 average pooling, spread back (make_pool_grad.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=72   ; dP: 2 images x 6 x 6 pixels, 16 lanes
read_host host=0xc800 params=0 rows=1   ; set 0: bias 0, no upper bound
read_weights addr=0x4800 tiles=1   ; four identities x 1/4, one a tap
set_window in_h=12 in_w=6 kh=2 kw=2 out_h=24 out_w=12 stride_y=1 stride_x=1 channels=16 pad_top=1 pad_left=1 pixel_bytes=128 dilated
matmul ub=0 acc=0 rows=288 ktile=0 window switch
activate acc=0 ub=72 rows=288 params=0
write_host ub=72 host=0xd000 rows=288
halt
