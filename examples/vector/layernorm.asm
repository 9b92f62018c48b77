; LayerNorm of 197 rows 768 wide (ViT-B/16's tokens) on the vector unit of one tpu-v3
; core: y = (x - mean) / sqrt(var + eps) x gamma + beta, each row held as 6 blocks of
; 128-lane buffer rows (block k, lanes 128k .. 128k + 127, at rows 197k .. 197k + 196).
; x, gamma, beta and y bfloat16; 1 / 768 and eps one float32 row each; everything between
; float32. make_layernorm.py writes the input and the expected output (numpy, float32, the
; chip's order).
;   tpusim exec examples/vector/layernorm.asm -c tpu-v3 --host-in examples/vector/layernorm.host.bin \
;       --host-out out.bin --host-out-range 0x100000:302592
set_format dtype=bf16
read_host host=0x0 ub=0 rows=1198                  ; x, gamma (1182-), beta (1188-), 1/768 (1194), eps (1196)
; mean: the six blocks' lane sums added, times 1 / 768
vector op=lane_sum a=0 out=1200 rows=197 o32
vector op=lane_sum a=197 out=1600 rows=197 o32
vector op=add a=1200 b=1600 out=1200 rows=197 a32 b32 o32
vector op=lane_sum a=394 out=1600 rows=197 o32
vector op=add a=1200 b=1600 out=1200 rows=197 a32 b32 o32
vector op=lane_sum a=591 out=1600 rows=197 o32
vector op=add a=1200 b=1600 out=1200 rows=197 a32 b32 o32
vector op=lane_sum a=788 out=1600 rows=197 o32
vector op=add a=1200 b=1600 out=1200 rows=197 a32 b32 o32
vector op=lane_sum a=985 out=1600 rows=197 o32
vector op=add a=1200 b=1600 out=1200 rows=197 a32 b32 o32
vector op=mul a=1200 b=1194 out=1200 rows=197 a32 b32 o32 bcast
; d = x - mean, block by block; var: the lane sums of d x d, times 1 / 768
vector op=sub a=0 b=1200 out=2000 rows=197 b32 o32
vector op=sub a=197 b=1200 out=2394 rows=197 b32 o32
vector op=sub a=394 b=1200 out=2788 rows=197 b32 o32
vector op=sub a=591 b=1200 out=3182 rows=197 b32 o32
vector op=sub a=788 b=1200 out=3576 rows=197 b32 o32
vector op=sub a=985 b=1200 out=3970 rows=197 b32 o32
vector op=mul a=2000 b=2000 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=4800 rows=197 a32 o32
vector op=mul a=2394 b=2394 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=1600 rows=197 a32 o32
vector op=add a=4800 b=1600 out=4800 rows=197 a32 b32 o32
vector op=mul a=2788 b=2788 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=1600 rows=197 a32 o32
vector op=add a=4800 b=1600 out=4800 rows=197 a32 b32 o32
vector op=mul a=3182 b=3182 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=1600 rows=197 a32 o32
vector op=add a=4800 b=1600 out=4800 rows=197 a32 b32 o32
vector op=mul a=3576 b=3576 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=1600 rows=197 a32 o32
vector op=add a=4800 b=1600 out=4800 rows=197 a32 b32 o32
vector op=mul a=3970 b=3970 out=4400 rows=197 a32 b32 o32
vector op=lane_sum a=4400 out=1600 rows=197 a32 o32
vector op=add a=4800 b=1600 out=4800 rows=197 a32 b32 o32
vector op=mul a=4800 b=1194 out=4800 rows=197 a32 b32 o32 bcast
; r = 1 / sqrt(var + eps)
vector op=add a=4800 b=1196 out=4800 rows=197 a32 b32 o32 bcast
vector op=rsqrt a=4800 out=4800 rows=197 a32 o32
; y = d x r x gamma + beta, rounded to bfloat16
vector op=mul a=2000 b=4800 out=2000 rows=197 a32 b32 o32
vector op=mul a=2000 b=1182 out=2000 rows=197 a32 o32 bcast
vector op=add a=2000 b=1188 out=5200 rows=197 a32 bcast
vector op=mul a=2394 b=4800 out=2394 rows=197 a32 b32 o32
vector op=mul a=2394 b=1183 out=2394 rows=197 a32 o32 bcast
vector op=add a=2394 b=1189 out=5397 rows=197 a32 bcast
vector op=mul a=2788 b=4800 out=2788 rows=197 a32 b32 o32
vector op=mul a=2788 b=1184 out=2788 rows=197 a32 o32 bcast
vector op=add a=2788 b=1190 out=5594 rows=197 a32 bcast
vector op=mul a=3182 b=4800 out=3182 rows=197 a32 b32 o32
vector op=mul a=3182 b=1185 out=3182 rows=197 a32 o32 bcast
vector op=add a=3182 b=1191 out=5791 rows=197 a32 bcast
vector op=mul a=3576 b=4800 out=3576 rows=197 a32 b32 o32
vector op=mul a=3576 b=1186 out=3576 rows=197 a32 o32 bcast
vector op=add a=3576 b=1192 out=5988 rows=197 a32 bcast
vector op=mul a=3970 b=4800 out=3970 rows=197 a32 b32 o32
vector op=mul a=3970 b=1187 out=3970 rows=197 a32 o32 bcast
vector op=add a=3970 b=1193 out=6185 rows=197 a32 bcast
write_host ub=5200 host=0x100000 rows=1182
halt
