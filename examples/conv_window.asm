; A convolution whose windows the chip forms itself (docs/isa.md, "Convolution windows"):
; a 6 x 6 map of 3 channels (one pixel per 4-byte row on teach-4) in the unified buffer,
; 3 x 3 kernels of 4 filters, padding 1, fused 2 x 2 max pooling. K = 3 x 3 x 3 = 27 is
; 7 K-tiles of 4; each `matmul window` streams the 36 output pixels' rows of one K-tile.
read_host    host=0x0 ub=0 rows=36                 ; the map: 36 pixels
read_host    host=0x100 params=0 rows=1            ; bias, multiplier, shift of the 4 filters
read_weights addr=0x0 tiles=7                       ; the 7 K-tiles of the 4 filters
set_window   in_h=6 in_w=6 kh=3 kw=3 out_h=6 out_w=6 stride_y=1 stride_x=1 channels=3 pad_top=1 pad_left=1 pixel_bytes=4 pooled
matmul       ub=0 acc=0 rows=36 ktile=0 window switch
matmul       ub=0 acc=0 rows=36 ktile=1 window switch accumulate
matmul       ub=0 acc=0 rows=36 ktile=2 window switch accumulate
matmul       ub=0 acc=0 rows=36 ktile=3 window switch accumulate
matmul       ub=0 acc=0 rows=36 ktile=4 window switch accumulate
matmul       ub=0 acc=0 rows=36 ktile=5 window switch accumulate
matmul       ub=0 acc=0 rows=36 ktile=6 window switch accumulate
activate     acc=0 ub=64 rows=36 params=0 relu pool=max  ; 9 pooled pixels
write_host   ub=64 host=0x200 rows=9
halt
