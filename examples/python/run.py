"""`kestrel run MODEL -p PROMPT -n N --temp 0 --ids` through Kestrel's C ABI (include/kestrel.h) with ctypes:
python3 run.py LIBRARY MODEL PROMPT N   (LIBRARY: target/capi/libkestrel-x86_64-linux.so, scripts/capi.sh build)"""
import ctypes as C, mmap, struct, sys
k, f, prompt, n = C.CDLL(sys.argv[1]), open(sys.argv[2], "rb"), sys.argv[3].encode(), int(sys.argv[4])
k.kestrel_error.restype, P, Z, U = C.c_char_p, C.c_void_p, C.c_size_t, C.c_uint32
model = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # page-aligned: the model needs 64
cfg, err, size, e, ids, cnt = C.create_string_buffer(128), C.create_string_buffer(256), Z(), P(), (U * 4096)(), Z()
k.kestrel_config_init(cfg)  # then kestrel_config's x86_64 offsets: cpu_features 24, temperature 48
avx2 = all(x in open("/proc/cpuinfo").read().split() for x in ("avx2", "fma", "f16c"))
struct.pack_into("I", cfg, 24, 2 * avx2), struct.pack_into("f", cfg, 48, 0.0)  # KESTREL_CPU_AVX2; greedy
mp, ml = P(C.addressof(C.c_char.from_buffer(model))), Z(len(model))
assert k.kestrel_memory_size(mp, ml, cfg, C.byref(size), err, Z(256)) == 0, err.value
mem = C.create_string_buffer(size.value + 64)  # the block must be 64-byte aligned
assert k.kestrel_open(mp, ml, cfg, P(C.addressof(mem) + 63 & ~63), size, C.byref(e), err, Z(256)) == 0, err.value
assert k.kestrel_chat_turn(e, None, Z(0), prompt, Z(len(prompt)), ids, Z(4096), C.byref(cnt)) == 0, k.kestrel_error(e)
assert k.kestrel_feed(e, ids, cnt) == 0, k.kestrel_error(e)
emit = C.CFUNCTYPE(None, P, C.POINTER(C.c_char), Z)(lambda _, text, length: sys.stdout.buffer.write(text[:length]))
assert k.kestrel_generate(e, U(n), emit, None, C.byref(gen := U())) in (0, 1), k.kestrel_error(e)  # OK or END
hist, hn = C.POINTER(U)(), Z()
assert k.kestrel_history(e, C.byref(hist), C.byref(hn)) == 0, k.kestrel_error(e)
sys.stdout.flush(), print("\n" + str(hist[cnt.value : cnt.value + gen.value]))
