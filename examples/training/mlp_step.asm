; Two SGD steps with momentum of a 200-100-10 perceptron on one tpu-v2 core, batches of 64: forward,
; softmax cross-entropy, backward and the update all on the chip, the master weights
; and optimizer state (float32) staying in the unified buffer. Written by
; make_mlp_step.py (edit that); docs/training.md walks through it.
;   tpusim exec examples/training/mlp_step.asm -c tpu-v2 --engine fast \
;       --host-in examples/training/mlp_step.host.bin --host-out out.bin \
;       --host-out-range 0x9c800:852992
set_format dtype=bf16
read_host host=0x9c000 params=0 rows=1   ; set 0: bias 0, no upper bound
read_host host=0x0 ub=0 rows=1792   ; identity, constants, W1, W2, V1, V2
read_host host=0x70000 ub=2560 rows=64   ; zeros a transposed load reads
read_host host=0x70000 ub=3586 rows=64   ; zeros a transposed load reads
read_host host=0x70000 ub=3970 rows=64   ; zeros a transposed load reads
; ---- step 1
read_host host=0x74000 ub=1792 rows=320   ; X (two blocks, zeros after each), labels
vector op=copy a=256 out=2112 rows=256 a32   ; W1 in bfloat16
vector op=copy a=768 out=2368 rows=128 a32   ; W2 in bfloat16
load_weights ub=2112 tiles=2
matmul ub=1792 acc=0 rows=64 switch
matmul ub=1920 acc=0 rows=64 switch accumulate   ; z1 = X W1
activate acc=0 ub=2496 rows=64 params=0 relu   ; h = relu(z1)
vector op=equal a=2496 b=131 out=2624 rows=64 bcast   ; where h = 0
vector op=add a=2496 b=130 out=2496 rows=64 bcast   ; h lane 100 = 1 (the bias)
load_weights ub=2368 tiles=1
matmul ub=2496 acc=64 rows=64 switch   ; logits = h W2
activate acc=64 ub=2688 rows=64 params=0
vector op=add a=2688 b=128 out=3008 rows=64 b32 o32 bcast   ; -inf past class 10
vector op=lane_max a=3008 out=2752 rows=64 a32 o32
vector op=sub a=3008 b=2752 out=3008 rows=64 a32 b32 o32   ; L - m
vector op=mul a=2048 b=131 out=3264 rows=64 o32 bcast   ; zeros
vector op=select a=2048 b=3008 out=3264 rows=64 b32 o32   ; L - m at the label
vector op=lane_sum a=3264 out=3264 rows=64 a32 o32
vector op=exp a=3008 out=3008 rows=64 a32 o32
vector op=lane_sum a=3008 out=2880 rows=64 a32 o32
vector op=log a=2880 out=3392 rows=64 a32 o32
vector op=sub a=3392 b=3264 out=3392 rows=64 a32 b32 o32   ; each image's loss
vector op=row_sum a=3392 out=3520 rows=64 a32 o32
vector op=mul a=3520 b=132 out=3520 rows=1 a32 b32 o32   ; their mean
vector op=recip a=2880 out=3136 rows=64 a32 o32
vector op=mul a=3008 b=3136 out=3008 rows=64 a32 b32 o32   ; p = softmax
vector op=sub a=3008 b=2048 out=3008 rows=64 a32 o32   ; p - y
vector op=mul a=3008 b=132 out=3522 rows=64 a32 b32 bcast   ; dz2 = (p - y) / 64
write_host ub=3392 host=0x9c800 rows=130   ; the losses
load_weights ub=2496 tiles=1 transpose
matmul ub=0 acc=128 rows=128 switch   ; h^T
activate acc=128 ub=3650 rows=128 params=0
load_weights ub=3522 tiles=1
matmul ub=3650 acc=256 rows=128 switch   ; dW2 = h^T dz2
activate acc=256 ub=3778 rows=128 params=0
load_weights ub=2368 tiles=1 transpose
matmul ub=3522 acc=384 rows=64 switch   ; dh = dz2 W2^T
activate acc=384 ub=3906 rows=64 params=0
vector op=select a=2624 b=131 out=3906 rows=64 bcast   ; dz1: 0 where h = 0
load_weights ub=1792 tiles=1 transpose
matmul ub=0 acc=448 rows=128 switch   ; X^T, inputs 0-127
activate acc=448 ub=4034 rows=128 params=0
load_weights ub=1920 tiles=1 transpose
matmul ub=0 acc=576 rows=128 switch   ; X^T, inputs 128-255
activate acc=576 ub=4162 rows=128 params=0
load_weights ub=3906 tiles=1
matmul ub=4034 acc=704 rows=128 switch   ; dW1 = X^T dz1
matmul ub=4162 acc=832 rows=128
activate acc=704 ub=4290 rows=256 params=0
vector op=mul a=1024 b=134 out=4546 rows=256 a32 b32 o32 bcast
vector op=add a=4546 b=4290 out=1024 rows=256 a32 o32   ; v = mu v + g
vector op=mul a=1024 b=136 out=4546 rows=256 a32 b32 o32 bcast
vector op=sub a=256 b=4546 out=256 rows=256 a32 b32 o32   ; w = w - lr v
vector op=mul a=1536 b=134 out=4546 rows=128 a32 b32 o32 bcast
vector op=add a=4546 b=3778 out=1536 rows=128 a32 o32   ; v = mu v + g
vector op=mul a=1536 b=136 out=4546 rows=128 a32 b32 o32 bcast
vector op=sub a=768 b=4546 out=768 rows=128 a32 b32 o32   ; w = w - lr v
write_host ub=256 host=0xa4a00 rows=1536   ; the weights and state after the step
; ---- step 2
read_host host=0x88000 ub=1792 rows=320   ; X (two blocks, zeros after each), labels
vector op=copy a=256 out=2112 rows=256 a32   ; W1 in bfloat16
vector op=copy a=768 out=2368 rows=128 a32   ; W2 in bfloat16
load_weights ub=2112 tiles=2
matmul ub=1792 acc=0 rows=64 switch
matmul ub=1920 acc=0 rows=64 switch accumulate   ; z1 = X W1
activate acc=0 ub=2496 rows=64 params=0 relu   ; h = relu(z1)
vector op=equal a=2496 b=131 out=2624 rows=64 bcast   ; where h = 0
vector op=add a=2496 b=130 out=2496 rows=64 bcast   ; h lane 100 = 1 (the bias)
load_weights ub=2368 tiles=1
matmul ub=2496 acc=64 rows=64 switch   ; logits = h W2
activate acc=64 ub=2688 rows=64 params=0
vector op=add a=2688 b=128 out=3008 rows=64 b32 o32 bcast   ; -inf past class 10
vector op=lane_max a=3008 out=2752 rows=64 a32 o32
vector op=sub a=3008 b=2752 out=3008 rows=64 a32 b32 o32   ; L - m
vector op=mul a=2048 b=131 out=3264 rows=64 o32 bcast   ; zeros
vector op=select a=2048 b=3008 out=3264 rows=64 b32 o32   ; L - m at the label
vector op=lane_sum a=3264 out=3264 rows=64 a32 o32
vector op=exp a=3008 out=3008 rows=64 a32 o32
vector op=lane_sum a=3008 out=2880 rows=64 a32 o32
vector op=log a=2880 out=3392 rows=64 a32 o32
vector op=sub a=3392 b=3264 out=3392 rows=64 a32 b32 o32   ; each image's loss
vector op=row_sum a=3392 out=3520 rows=64 a32 o32
vector op=mul a=3520 b=132 out=3520 rows=1 a32 b32 o32   ; their mean
vector op=recip a=2880 out=3136 rows=64 a32 o32
vector op=mul a=3008 b=3136 out=3008 rows=64 a32 b32 o32   ; p = softmax
vector op=sub a=3008 b=2048 out=3008 rows=64 a32 o32   ; p - y
vector op=mul a=3008 b=132 out=3522 rows=64 a32 b32 bcast   ; dz2 = (p - y) / 64
write_host ub=3392 host=0x104a00 rows=130   ; the losses
load_weights ub=2496 tiles=1 transpose
matmul ub=0 acc=128 rows=128 switch   ; h^T
activate acc=128 ub=3650 rows=128 params=0
load_weights ub=3522 tiles=1
matmul ub=3650 acc=256 rows=128 switch   ; dW2 = h^T dz2
activate acc=256 ub=3778 rows=128 params=0
load_weights ub=2368 tiles=1 transpose
matmul ub=3522 acc=384 rows=64 switch   ; dh = dz2 W2^T
activate acc=384 ub=3906 rows=64 params=0
vector op=select a=2624 b=131 out=3906 rows=64 bcast   ; dz1: 0 where h = 0
load_weights ub=1792 tiles=1 transpose
matmul ub=0 acc=448 rows=128 switch   ; X^T, inputs 0-127
activate acc=448 ub=4034 rows=128 params=0
load_weights ub=1920 tiles=1 transpose
matmul ub=0 acc=576 rows=128 switch   ; X^T, inputs 128-255
activate acc=576 ub=4162 rows=128 params=0
load_weights ub=3906 tiles=1
matmul ub=4034 acc=704 rows=128 switch   ; dW1 = X^T dz1
matmul ub=4162 acc=832 rows=128
activate acc=704 ub=4290 rows=256 params=0
vector op=mul a=1024 b=134 out=4546 rows=256 a32 b32 o32 bcast
vector op=add a=4546 b=4290 out=1024 rows=256 a32 o32   ; v = mu v + g
vector op=mul a=1024 b=136 out=4546 rows=256 a32 b32 o32 bcast
vector op=sub a=256 b=4546 out=256 rows=256 a32 b32 o32   ; w = w - lr v
vector op=mul a=1536 b=134 out=4546 rows=128 a32 b32 o32 bcast
vector op=add a=4546 b=3778 out=1536 rows=128 a32 o32   ; v = mu v + g
vector op=mul a=1536 b=136 out=4546 rows=128 a32 b32 o32 bcast
vector op=sub a=768 b=4546 out=768 rows=128 a32 b32 o32   ; w = w - lr v
write_host ub=256 host=0x10cc00 rows=1536   ; the weights and state after the step
halt
