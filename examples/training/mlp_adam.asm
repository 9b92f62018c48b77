; Two Adam steps of a 200-100-10 perceptron on one tpu-v2 core, batches of 64: forward,
; softmax cross-entropy, backward and the update all on the chip, the master weights
; and optimizer state (float32) staying in the unified buffer. Written by
; make_mlp_step.py (edit that); docs/training.md walks through it.
;   tpusim exec examples/training/mlp_adam.asm -c tpu-v2 --engine fast \
;       --host-in examples/training/mlp_adam.host.bin --host-out out.bin \
;       --host-out-range 0xcc800:1246208
set_format dtype=bf16
read_host host=0xcc000 params=0 rows=1   ; set 0: bias 0, no upper bound
read_host host=0x0 ub=0 rows=2560   ; identity, constants, W1, W2, M1, M2, S1, S2
read_host host=0xa0000 ub=3328 rows=64   ; zeros a transposed load reads
read_host host=0xa0000 ub=4354 rows=64   ; zeros a transposed load reads
read_host host=0xa0000 ub=4738 rows=64   ; zeros a transposed load reads
; ---- step 1
read_host host=0xa4000 ub=2560 rows=320   ; X (two blocks, zeros after each), labels
vector op=copy a=256 out=2880 rows=256 a32   ; W1 in bfloat16
vector op=copy a=768 out=3136 rows=128 a32   ; W2 in bfloat16
load_weights ub=2880 tiles=2
matmul ub=2560 acc=0 rows=64 switch
matmul ub=2688 acc=0 rows=64 switch accumulate   ; z1 = X W1
activate acc=0 ub=3264 rows=64 params=0 relu   ; h = relu(z1)
vector op=equal a=3264 b=131 out=3392 rows=64 bcast   ; where h = 0
vector op=add a=3264 b=130 out=3264 rows=64 bcast   ; h lane 100 = 1 (the bias)
load_weights ub=3136 tiles=1
matmul ub=3264 acc=64 rows=64 switch   ; logits = h W2
activate acc=64 ub=3456 rows=64 params=0
vector op=add a=3456 b=128 out=3776 rows=64 b32 o32 bcast   ; -inf past class 10
vector op=lane_max a=3776 out=3520 rows=64 a32 o32
vector op=sub a=3776 b=3520 out=3776 rows=64 a32 b32 o32   ; L - m
vector op=mul a=2816 b=131 out=4032 rows=64 o32 bcast   ; zeros
vector op=select a=2816 b=3776 out=4032 rows=64 b32 o32   ; L - m at the label
vector op=lane_sum a=4032 out=4032 rows=64 a32 o32
vector op=exp a=3776 out=3776 rows=64 a32 o32
vector op=lane_sum a=3776 out=3648 rows=64 a32 o32
vector op=log a=3648 out=4160 rows=64 a32 o32
vector op=sub a=4160 b=4032 out=4160 rows=64 a32 b32 o32   ; each image's loss
vector op=row_sum a=4160 out=4288 rows=64 a32 o32
vector op=mul a=4288 b=132 out=4288 rows=1 a32 b32 o32   ; their mean
vector op=recip a=3648 out=3904 rows=64 a32 o32
vector op=mul a=3776 b=3904 out=3776 rows=64 a32 b32 o32   ; p = softmax
vector op=sub a=3776 b=2816 out=3776 rows=64 a32 o32   ; p - y
vector op=mul a=3776 b=132 out=4290 rows=64 a32 b32 bcast   ; dz2 = (p - y) / 64
write_host ub=4160 host=0xcc800 rows=130   ; the losses
load_weights ub=3264 tiles=1 transpose
matmul ub=0 acc=128 rows=128 switch   ; h^T
activate acc=128 ub=4418 rows=128 params=0
load_weights ub=4290 tiles=1
matmul ub=4418 acc=256 rows=128 switch   ; dW2 = h^T dz2
activate acc=256 ub=4546 rows=128 params=0
load_weights ub=3136 tiles=1 transpose
matmul ub=4290 acc=384 rows=64 switch   ; dh = dz2 W2^T
activate acc=384 ub=4674 rows=64 params=0
vector op=select a=3392 b=131 out=4674 rows=64 bcast   ; dz1: 0 where h = 0
load_weights ub=2560 tiles=1 transpose
matmul ub=0 acc=448 rows=128 switch   ; X^T, inputs 0-127
activate acc=448 ub=4802 rows=128 params=0
load_weights ub=2688 tiles=1 transpose
matmul ub=0 acc=576 rows=128 switch   ; X^T, inputs 128-255
activate acc=576 ub=4930 rows=128 params=0
load_weights ub=4674 tiles=1
matmul ub=4802 acc=704 rows=128 switch   ; dW1 = X^T dz1
matmul ub=4930 acc=832 rows=128
activate acc=704 ub=5058 rows=256 params=0
vector op=mul a=1024 b=134 out=5314 rows=256 a32 b32 o32 bcast
vector op=mul a=5058 b=136 out=5826 rows=256 b32 o32 bcast
vector op=add a=5314 b=5826 out=1024 rows=256 a32 b32 o32   ; m = b1 m + (1 - b1) g
vector op=mul a=1792 b=138 out=5314 rows=256 a32 b32 o32 bcast
vector op=mul a=5058 b=5058 out=5826 rows=256 o32
vector op=mul a=5826 b=140 out=5826 rows=256 a32 b32 o32 bcast
vector op=add a=5314 b=5826 out=1792 rows=256 a32 b32 o32   ; s = b2 s + (1 - b2) g^2
vector op=rsqrt a=1792 out=5314 rows=256 a32 o32
vector op=recip a=5314 out=5314 rows=256 a32 o32   ; sqrt(s), 0 where s = 0
vector op=mul a=5314 b=146 out=5314 rows=256 a32 b32 o32 bcast
vector op=add a=5314 b=142 out=5314 rows=256 a32 b32 o32 bcast   ; sqrt(s / (1 - b2^t)) + eps
vector op=recip a=5314 out=5314 rows=256 a32 o32
vector op=mul a=1024 b=5314 out=5314 rows=256 a32 b32 o32
vector op=mul a=5314 b=144 out=5314 rows=256 a32 b32 o32 bcast
vector op=sub a=256 b=5314 out=256 rows=256 a32 b32 o32   ; w = w - lr / (1 - b1^t) m / (...)
vector op=mul a=1536 b=134 out=5314 rows=128 a32 b32 o32 bcast
vector op=mul a=4546 b=136 out=5826 rows=128 b32 o32 bcast
vector op=add a=5314 b=5826 out=1536 rows=128 a32 b32 o32   ; m = b1 m + (1 - b1) g
vector op=mul a=2304 b=138 out=5314 rows=128 a32 b32 o32 bcast
vector op=mul a=4546 b=4546 out=5826 rows=128 o32
vector op=mul a=5826 b=140 out=5826 rows=128 a32 b32 o32 bcast
vector op=add a=5314 b=5826 out=2304 rows=128 a32 b32 o32   ; s = b2 s + (1 - b2) g^2
vector op=rsqrt a=2304 out=5314 rows=128 a32 o32
vector op=recip a=5314 out=5314 rows=128 a32 o32   ; sqrt(s), 0 where s = 0
vector op=mul a=5314 b=146 out=5314 rows=128 a32 b32 o32 bcast
vector op=add a=5314 b=142 out=5314 rows=128 a32 b32 o32 bcast   ; sqrt(s / (1 - b2^t)) + eps
vector op=recip a=5314 out=5314 rows=128 a32 o32
vector op=mul a=1536 b=5314 out=5314 rows=128 a32 b32 o32
vector op=mul a=5314 b=144 out=5314 rows=128 a32 b32 o32 bcast
vector op=sub a=768 b=5314 out=768 rows=128 a32 b32 o32   ; w = w - lr / (1 - b1^t) m / (...)
write_host ub=256 host=0xd4a00 rows=2304   ; the weights and state after the step
; ---- step 2
read_host host=0xb8000 ub=2560 rows=320   ; X (two blocks, zeros after each), labels
vector op=copy a=256 out=2880 rows=256 a32   ; W1 in bfloat16
vector op=copy a=768 out=3136 rows=128 a32   ; W2 in bfloat16
load_weights ub=2880 tiles=2
matmul ub=2560 acc=0 rows=64 switch
matmul ub=2688 acc=0 rows=64 switch accumulate   ; z1 = X W1
activate acc=0 ub=3264 rows=64 params=0 relu   ; h = relu(z1)
vector op=equal a=3264 b=131 out=3392 rows=64 bcast   ; where h = 0
vector op=add a=3264 b=130 out=3264 rows=64 bcast   ; h lane 100 = 1 (the bias)
load_weights ub=3136 tiles=1
matmul ub=3264 acc=64 rows=64 switch   ; logits = h W2
activate acc=64 ub=3456 rows=64 params=0
vector op=add a=3456 b=128 out=3776 rows=64 b32 o32 bcast   ; -inf past class 10
vector op=lane_max a=3776 out=3520 rows=64 a32 o32
vector op=sub a=3776 b=3520 out=3776 rows=64 a32 b32 o32   ; L - m
vector op=mul a=2816 b=131 out=4032 rows=64 o32 bcast   ; zeros
vector op=select a=2816 b=3776 out=4032 rows=64 b32 o32   ; L - m at the label
vector op=lane_sum a=4032 out=4032 rows=64 a32 o32
vector op=exp a=3776 out=3776 rows=64 a32 o32
vector op=lane_sum a=3776 out=3648 rows=64 a32 o32
vector op=log a=3648 out=4160 rows=64 a32 o32
vector op=sub a=4160 b=4032 out=4160 rows=64 a32 b32 o32   ; each image's loss
vector op=row_sum a=4160 out=4288 rows=64 a32 o32
vector op=mul a=4288 b=132 out=4288 rows=1 a32 b32 o32   ; their mean
vector op=recip a=3648 out=3904 rows=64 a32 o32
vector op=mul a=3776 b=3904 out=3776 rows=64 a32 b32 o32   ; p = softmax
vector op=sub a=3776 b=2816 out=3776 rows=64 a32 o32   ; p - y
vector op=mul a=3776 b=132 out=4290 rows=64 a32 b32 bcast   ; dz2 = (p - y) / 64
write_host ub=4160 host=0x164a00 rows=130   ; the losses
load_weights ub=3264 tiles=1 transpose
matmul ub=0 acc=128 rows=128 switch   ; h^T
activate acc=128 ub=4418 rows=128 params=0
load_weights ub=4290 tiles=1
matmul ub=4418 acc=256 rows=128 switch   ; dW2 = h^T dz2
activate acc=256 ub=4546 rows=128 params=0
load_weights ub=3136 tiles=1 transpose
matmul ub=4290 acc=384 rows=64 switch   ; dh = dz2 W2^T
activate acc=384 ub=4674 rows=64 params=0
vector op=select a=3392 b=131 out=4674 rows=64 bcast   ; dz1: 0 where h = 0
load_weights ub=2560 tiles=1 transpose
matmul ub=0 acc=448 rows=128 switch   ; X^T, inputs 0-127
activate acc=448 ub=4802 rows=128 params=0
load_weights ub=2688 tiles=1 transpose
matmul ub=0 acc=576 rows=128 switch   ; X^T, inputs 128-255
activate acc=576 ub=4930 rows=128 params=0
load_weights ub=4674 tiles=1
matmul ub=4802 acc=704 rows=128 switch   ; dW1 = X^T dz1
matmul ub=4930 acc=832 rows=128
activate acc=704 ub=5058 rows=256 params=0
vector op=mul a=1024 b=134 out=5314 rows=256 a32 b32 o32 bcast
vector op=mul a=5058 b=136 out=5826 rows=256 b32 o32 bcast
vector op=add a=5314 b=5826 out=1024 rows=256 a32 b32 o32   ; m = b1 m + (1 - b1) g
vector op=mul a=1792 b=138 out=5314 rows=256 a32 b32 o32 bcast
vector op=mul a=5058 b=5058 out=5826 rows=256 o32
vector op=mul a=5826 b=140 out=5826 rows=256 a32 b32 o32 bcast
vector op=add a=5314 b=5826 out=1792 rows=256 a32 b32 o32   ; s = b2 s + (1 - b2) g^2
vector op=rsqrt a=1792 out=5314 rows=256 a32 o32
vector op=recip a=5314 out=5314 rows=256 a32 o32   ; sqrt(s), 0 where s = 0
vector op=mul a=5314 b=150 out=5314 rows=256 a32 b32 o32 bcast
vector op=add a=5314 b=142 out=5314 rows=256 a32 b32 o32 bcast   ; sqrt(s / (1 - b2^t)) + eps
vector op=recip a=5314 out=5314 rows=256 a32 o32
vector op=mul a=1024 b=5314 out=5314 rows=256 a32 b32 o32
vector op=mul a=5314 b=148 out=5314 rows=256 a32 b32 o32 bcast
vector op=sub a=256 b=5314 out=256 rows=256 a32 b32 o32   ; w = w - lr / (1 - b1^t) m / (...)
vector op=mul a=1536 b=134 out=5314 rows=128 a32 b32 o32 bcast
vector op=mul a=4546 b=136 out=5826 rows=128 b32 o32 bcast
vector op=add a=5314 b=5826 out=1536 rows=128 a32 b32 o32   ; m = b1 m + (1 - b1) g
vector op=mul a=2304 b=138 out=5314 rows=128 a32 b32 o32 bcast
vector op=mul a=4546 b=4546 out=5826 rows=128 o32
vector op=mul a=5826 b=140 out=5826 rows=128 a32 b32 o32 bcast
vector op=add a=5314 b=5826 out=2304 rows=128 a32 b32 o32   ; s = b2 s + (1 - b2) g^2
vector op=rsqrt a=2304 out=5314 rows=128 a32 o32
vector op=recip a=5314 out=5314 rows=128 a32 o32   ; sqrt(s), 0 where s = 0
vector op=mul a=5314 b=150 out=5314 rows=128 a32 b32 o32 bcast
vector op=add a=5314 b=142 out=5314 rows=128 a32 b32 o32 bcast   ; sqrt(s / (1 - b2^t)) + eps
vector op=recip a=5314 out=5314 rows=128 a32 o32
vector op=mul a=1536 b=5314 out=5314 rows=128 a32 b32 o32
vector op=mul a=5314 b=148 out=5314 rows=128 a32 b32 o32 bcast
vector op=sub a=768 b=5314 out=768 rows=128 a32 b32 o32   ; w = w - lr / (1 - b1^t) m / (...)
write_host ub=256 host=0x16cc00 rows=2304   ; the weights and state after the step
halt
