read_host host=0x0 ub=0 rows=18
read_host host=0x1b3 params=0 rows=3
read_weights addr=0xd4 tiles=1
matmul ub=0 acc=0 rows=13 switch
read_host host=0x1b3 params=0 rows=3
matmul ub=7 acc=3 rows=10 stride=1 accumulate
write_host ub=5 host=0x3ae rows=12
activate acc=1 ub=2 rows=10 params=2
read_weights addr=0x9 tiles=2
activate acc=8 ub=7 rows=1 params=2 relu
read_weights addr=0xa tiles=2
read_host host=0x1b3 params=0 rows=3
read_weights addr=0x0 tiles=3
activate acc=1 ub=2 rows=12 params=1 stride=4 relu pool=max
activate acc=10 ub=2 rows=3 params=2
set_window in_h=3 in_w=4 kh=2 kw=3 out_h=2 out_w=4 stride_y=2 stride_x=1 channels=22 pad_left=2 pixel_bytes=22 pooled
write_host ub=3 host=0x3e1 rows=7
activate acc=4 ub=8 rows=9 params=1 relu
set_window in_h=5 in_w=2 kh=5 kw=3 out_h=5 out_w=1 stride_y=1 stride_x=3 channels=25 pad_top=2 pad_left=1 pixel_bytes=25
nop
write_host ub=3 host=0x3c7 rows=13
nop
write_host ub=4 host=0x38f rows=13
read_host host=0x6f ub=15 rows=2
matmul ub=13 acc=10 rows=2 stride=1 switch max
matmul ub=1 acc=3 rows=3 stride=2 switch
write_host ub=2 host=0x424 rows=10
halt
