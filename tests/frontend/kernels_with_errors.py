"""Kernels with one mistake each; the line that holds the mistake is tagged `# ERR`."""

import tilecraft.language as T


def unknown_name():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            T.fooo(A)  # ERR

    return k


def wrong_bindings():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(4, 4, threads=128) as bx:  # ERR
            T.clear(A)

    return k


def out_of_bounds_slice():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((256, 32), "float16")
            T.copy(A[0:256, 0:32], A_s)  # ERR

    return k


def gemm_shape_mismatch():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_f)  # ERR

    return k


def gemm_dtype_mismatch():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "bfloat16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_f)  # ERR

    return k


def copy_shape_mismatch():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            T.copy(A[0:64, 0:64], A_s)  # ERR

    return k


def python_try():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            try:  # ERR
                T.clear(A)
            except Exception:
                pass

    return k


def python_list_comprehension():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            xs = [i for i in range(4)]  # ERR

    return k


def rebind_device_value():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                v = A[i] * 2
                if v > 0:
                    v += 1  # ERR
                A[i] = v

    return k


def undefined_name():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[0] = not_defined_anywhere  # ERR  # noqa: F821

    return k


def tile_op_in_parallel():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                T.fill(A, 0)  # ERR

    return k


def call_time_kernel():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"),  # ERR
          B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A, B)

    return k
