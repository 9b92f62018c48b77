; Core 0 of 2: the sum of the two cores' gradients through HBM (make_allreduce.py).
set_format dtype=bf16
read_host host=0x0 ub=0 rows=256   ; this core's gradient, 128 float32 rows
write_hbm ub=0 addr=0x100000 rows=256   ; into its slot in HBM
barrier cores=3   ; both written
read_hbm addr=0x110000 ub=256 rows=256   ; the other core's
vector op=add a=0 b=256 out=512 rows=128 a32 b32 o32   ; the sum, in float32
write_host ub=512 host=0x20000 rows=256
halt
