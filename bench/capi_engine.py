"""The C ABI's engines for the bench scripts (ctypes): the library and a model mapped once, a config
with this CPU's features, and engines opened over it, each in a block of its own.

    from capi_engine import Engines
    eng = Engines(LIBRARY, MODEL, context=4096, temperature=0.0)   # also batch=, threads=
    e = eng.open()                                                 # a kestrel_engine *
    eng.k.kestrel_feed(e, ...)                                     # eng.k: the library
"""
import ctypes as C, mmap, struct

P, Z, U = C.c_void_p, C.c_size_t, C.c_uint32


class Engines:
    def __init__(self, lib, path, context=4096, batch=None, threads=None, temperature=None):
        k = self.k = C.CDLL(lib)
        k.kestrel_error.restype = C.c_char_p
        self._file = open(path, "rb")
        self.model = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_COPY)  # page-aligned: 64 needed
        flags = open("/proc/cpuinfo").read().split()
        avx2 = all(x in flags for x in ("avx2", "fma", "f16c"))
        vnni = avx2 and all(x in flags for x in ("avx512_vnni", "avx512f", "avx512bw", "avx512vl"))
        self.kernels = "avx512-vnni" if vnni else "avx2" if avx2 else "scalar"
        cfg = self.cfg = C.create_string_buffer(128)
        k.kestrel_config_init(cfg)
        # kestrel_config's x86_64 offsets: context 4, batch 8, text_bytes 16, cpu_features 24,
        # threads 28, temperature 48.
        struct.pack_into("I", cfg, 4, context)
        struct.pack_into("I", cfg, 16, 1 << 16)
        struct.pack_into("I", cfg, 24, 2 * avx2 | 4 * vnni)
        if batch is not None:
            struct.pack_into("I", cfg, 8, batch)
        if threads is not None:
            struct.pack_into("I", cfg, 28, threads)
        if temperature is not None:
            struct.pack_into("f", cfg, 48, temperature)
        self.mp, self.ml = P(C.addressof(C.c_char.from_buffer(self.model))), Z(len(self.model))
        self.err, self.size = C.create_string_buffer(256), Z()
        assert k.kestrel_memory_size(self.mp, self.ml, cfg, C.byref(self.size), self.err, Z(256)) == 0, self.err.value
        self._blocks = []

    def open(self):
        """A new engine in a block of its own (kept while this object lives)."""
        mem = C.create_string_buffer(self.size.value + 64)  # the block must be 64-byte aligned
        self._blocks.append(mem)
        e = P()
        at = P(C.addressof(mem) + 63 & ~63)
        st = self.k.kestrel_open(self.mp, self.ml, self.cfg, at, self.size, C.byref(e), self.err, Z(256))
        assert st == 0, self.err.value
        return e

    def release(self):
        """Frees the blocks of the engines opened so far (close them first)."""
        self._blocks.clear()
