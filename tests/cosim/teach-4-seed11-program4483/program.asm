read_host host=0x0 ub=0 rows=205
read_host host=0x663 params=0 rows=1
read_weights addr=0x22 tiles=1
matmul ub=0 acc=0 rows=67 switch
activate acc=4 ub=41 rows=26 params=0
read_weights addr=0x5e tiles=1
read_weights addr=0x3e tiles=3
read_host host=0x2f4 ub=97 rows=43
read_host host=0x5b8 ub=39 rows=5
sync
read_host host=0x1ff ub=82 rows=30
matmul ub=5 acc=17 rows=49 accumulate
activate acc=25 ub=33 rows=4 params=0 relu pool=max
read_weights addr=0x10 tiles=2
matmul ub=31 acc=1 rows=60 switch
read_host host=0x0 ub=16383 rows=3
read_weights addr=0x18 tiles=3
matmul ub=11 acc=24 rows=20 switch accumulate
read_host host=0x43a ub=59 rows=13
read_host host=0x3f0 ub=93 rows=15
matmul ub=94 acc=50 rows=3 switch
read_host host=0x455 ub=100 rows=3
activate acc=49 ub=159 rows=7 params=0 relu
read_host host=0x55f ub=28 rows=19
nop
matmul ub=188 acc=24 rows=10 switch
read_host host=0x191 ub=70 rows=35
read_host host=0xc8 ub=179 rows=15
activate acc=17 ub=190 rows=16 params=0 relu pool=max
read_weights addr=0x3b tiles=1
nop
matmul ub=130 acc=11 rows=42 accumulate
activate acc=17 ub=26 rows=15 params=0 relu
matmul ub=103 acc=3 rows=35 switch accumulate
matmul ub=84 acc=10 rows=49
read_host host=0x378 ub=128 rows=25
read_host host=0x2c ub=18 rows=42
matmul ub=138 acc=7 rows=11 switch accumulate
halt
